// Inputs, fp64 references and comparisons for the cross-GPU op tests (ReduceScatter,
// MoeCombine). Every tensor is a function of (seed, rank, call) only, so the test process (which
// never touches CUDA) computes the references from the same values the ranks upload.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tp_problem.hpp"

namespace shardjit::testing {

inline std::uint64_t input_seed(std::uint64_t seed, int rank, int call) {
  return mix(seed * 1000003ull + static_cast<std::uint64_t>(rank) * 7919ull + static_cast<std::uint64_t>(call));
}

// Rank `rank`'s input of call `call`: count elements in [-1, 1] rounded to `dtype`.
inline std::vector<std::uint8_t> rank_input(std::uint64_t seed, int rank, int call, std::int64_t count, DType dtype) {
  return random_bytes(input_seed(seed, rank, call), 0, count, 1.0f, dtype);
}

inline std::vector<double> to_doubles(const std::vector<std::uint8_t>& bytes, DType dtype) {
  const std::size_t n = bytes.size() / dtype_size(dtype);
  std::vector<double> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (dtype == DType::kFP32) {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = v;
    } else {
      std::uint16_t b;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      out[i] = dtype == DType::kBF16 ? bf16_to_float(b) : fp16_to_float(b);
    }
  }
  return out;
}

// Half an ulp relative: what rounding an fp32 sum to the dtype may cost.
inline double rounding_of(DType dtype) {
  return dtype == DType::kBF16 ? 0x1.0p-8 : (dtype == DType::kFP16 ? 0x1.0p-11 : 0x1.0p-23);
}

struct CloseReport {
  double max_abs = 0;
  double rel_norm = 0;
  std::int64_t bad = 0;          // elements outside the tolerance
  std::int64_t first_bad = -1;
  std::int64_t nan_mismatches = 0;
};

// got (device bytes of `dtype`) against the fp64 reference: each element within half an ulp of
// the dtype plus the fp32 sum's error over `terms` terms; NaN exactly where the reference has
// NaN.
inline CloseReport compare_to_reference(const std::vector<std::uint8_t>& got_bytes, const std::vector<double>& ref,
                                        DType dtype, int terms) {
  const std::vector<double> got = to_doubles(got_bytes, dtype);
  CloseReport r;
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(ref[i])) {
      r.nan_mismatches += std::isnan(got[i]) != std::isnan(ref[i]) ? 1 : 0;
      continue;
    }
    const double e = std::abs(got[i] - ref[i]);
    const double allowed = rounding_of(dtype) * std::abs(ref[i]) + terms * 0x1.0p-22 * (1.0 + std::abs(ref[i]));
    if (e > allowed && r.bad++ == 0) r.first_bad = static_cast<std::int64_t>(i);
    r.max_abs = std::max(r.max_abs, e);
    err2 += e * e;
    ref2 += ref[i] * ref[i];
  }
  if (got.size() != ref.size()) r.bad += 1000000;
  r.rel_norm = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return r;
}

inline void expect_close(const std::vector<std::uint8_t>& got, const std::vector<double>& ref, DType dtype, int terms,
                         const std::string& what) {
  const CloseReport r = compare_to_reference(got, ref, dtype, terms);
  std::printf("[ accuracy ] %-40s %s max|d| %.3e rel-norm %.3e\n", what.c_str(), dtype_name(dtype), r.max_abs,
              r.rel_norm);
  EXPECT_EQ(r.bad, 0) << what << ": first bad element " << r.first_bad << " (max |d| " << r.max_abs << ")";
  EXPECT_EQ(r.nan_mismatches, 0) << what;
}

// The fp64 dense reduce-scatter reference: rank r's block, summed over every rank's input.
inline std::vector<double> reduce_scatter_reference(std::uint64_t seed, int call, int world, DType dtype,
                                                    std::int64_t hidden, const std::vector<std::int64_t>& rows,
                                                    int rank) {
  std::int64_t total = 0, offset = 0;
  for (std::size_t p = 0; p < rows.size(); ++p) {
    if (static_cast<int>(p) < rank) offset += rows[p];
    total += rows[p];
  }
  std::vector<double> out(static_cast<std::size_t>(rows[static_cast<std::size_t>(rank)] * hidden), 0.0);
  for (int p = 0; p < world; ++p) {
    const std::vector<double> in = to_doubles(rank_input(seed, p, call, total * hidden, dtype), dtype);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += in[static_cast<std::size_t>(offset * hidden) + i];
  }
  return out;
}

// A ReduceScatter whose peer is gone: rank 1 builds one (2 ranks x 8 rows of 256 bf16, on `path`)
// and exits without a word; rank 0 bounds its waits at 3 s, runs one call (its input from
// `seed`) and hands after_run(comm, op, device, output) what it needs to look at the outcome.
template <class AfterRun>
void reduce_scatter_without_its_peer(RankContext& ctx, CollectivePath path, std::uint64_t seed,
                                     AfterRun&& after_run) {
  constexpr std::int64_t kHidden = 256, kRows = 8;
  Runtime runtime;
  Communicator comm = rank_communicator(runtime, ctx);
  const DeviceContext& device = runtime.impl().device(ctx.rank);
  ReduceScatterConfig config;
  config.hidden = kHidden;
  config.rows_per_rank = {kRows, kRows};
  config.path = path;
  ReduceScatter op(runtime, comm, config);
  if (ctx.rank == 1) std::_Exit(0);  // gone without a word
  comm.set_timeout(std::chrono::seconds(3));
  DeviceArray input = DeviceArray::from(rank_input(seed, 0, 0, 2 * kRows * kHidden, DType::kBF16), device);
  DeviceArray output(kRows * kHidden * 2, device);
  op.run({input.data(), DType::kBF16, 2 * kRows, kHidden, 0}, {output.data(), DType::kBF16, kRows, kHidden, 0},
         nullptr);
  after_run(comm, op, device, output);
}

}  // namespace shardjit::testing
