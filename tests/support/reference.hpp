// fp64 CPU references and input generation for the op tests.
#pragma once

#include <cstdint>
#include <vector>

#include "shardjit/dtype.hpp"

namespace shardjit::testing {

// Host copies of device element types.
std::uint16_t float_to_bf16(float value);  // round to nearest even
float bf16_to_float(std::uint16_t bits);
std::uint16_t float_to_fp16(float value);
float fp16_to_float(std::uint16_t bits);

// `value` rounded to `dtype`: writes its device bytes (2 or 4) at `at` and returns it as float.
float store_as(float value, DType dtype, std::uint8_t* at);

// Random values in [-scale, scale] (a counter-based hash of `seed` and the index, made on all
// cores: weights of large vocabularies are hundreds of millions of values), rounded to `dtype`.
// Returns the rounded values as float and writes the device bytes (2 or 4 each) to `bytes`.
std::vector<float> random_values(std::uint64_t seed, std::size_t count, float scale, DType dtype,
                                 std::vector<std::uint8_t>& bytes);

struct LogpProblem {
  std::int64_t n = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab_start = 0;
  std::int64_t vocab_local = 0;  // rows of weight; the reference sees the whole vocabulary of one shard
  std::int64_t valid_vocab = 0;  // global
  double temperature = 1.0;
  std::int64_t ignore_index = -100;
  std::vector<float> hidden_values;  // [n, hidden]
  std::vector<float> weight_values;  // [vocab_local, hidden]
  std::vector<float> bias_values;    // [vocab_local] or empty
  std::vector<std::int64_t> targets; // [n]
};

struct LogpRow {
  double logp = 0;
  double lse = 0;
  double entropy = 0;
  bool bad_target = false;
};

// sum_k x[k] w[k] in fp64, in eight interleaved partial sums (the references' inner loop: one
// chain of dependent adds would leave the core waiting on each).
double dot_fp64(const float* x, const float* w, std::int64_t n);

// The reference of one row (fp64 over the rounded inputs), for a single-shard problem
// (vocab_start = 0 and the shard is the whole vocabulary).
LogpRow reference_logp_row(const LogpProblem& problem, std::int64_t row);

// References of `rows`, computed on all cores (across a row's vocabulary where the rows are fewer
// than the cores).
std::vector<LogpRow> reference_logp_rows(const LogpProblem& problem, const std::vector<std::int64_t>& rows);

}  // namespace shardjit::testing
