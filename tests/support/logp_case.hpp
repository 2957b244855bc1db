// A LinearLogp problem of the gpu tests' case tables: its size and dtypes, which every table
// shares, and the op config and the fp64 reference's problem built from them. A test's own case
// type derives from it and adds what that test varies; a table row lists the shared fields
// first, then the test's own, without inner braces (aggregate initialization fills the base
// first).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <vector>

#include "shardjit/linear_logp.hpp"
#include "support/reference.hpp"

namespace shardjit::testing {

struct LogpCase {
  const char* name;
  std::int64_t n, hidden, vocab;
  std::int64_t valid_vocab = 0;  // 0: all
  DType dtype = DType::kBF16;
  std::optional<DType> bias;
  DType targets = DType::kInt64;
  float temperature = 1.0f;
};

// The case's name, as gtest prints a parameter.
inline std::ostream& operator<<(std::ostream& os, const LogpCase& c) { return os << c.name; }

// The config of a single-GPU op for the case's size and dtypes; each test then sets what it adds
// (entropy, backward, workspaces, ...).
LinearLogpConfig logp_config(const LogpCase& c);

// The fp64 reference's problem for the case: its sizes and temperature; the test fills in the
// values and targets.
LogpProblem logp_problem(const LogpCase& c);

// Random targets for p's n rows (every `ignore_every`-th row from `ignore_at` on is ignored; row
// 0 targets column 0 and row 1 the last valid column, the tail tile) and upstream gradients g
// (of logp) in [-1, 1] and h (of lse) in [-0.25, 0.25], appended, from `seed`.
void random_targets_and_grads(LogpProblem& p, std::uint64_t seed, std::int64_t ignore_every, std::int64_t ignore_at,
                              std::vector<float>& g, std::vector<float>& h);

// The first column forbid_tokens forbids.
constexpr std::int64_t kFirstForbidden = 3;

// The op reads a forbidden token's z as about -1e30 (templates/linear_logp/bias_read.cuh): a
// target on one gets a finite logp below this.
constexpr float kForbiddenLogp = -1e29f;

// Forbids tokens as a logit mask folded into the bias does: bias -inf at every `every`-th column
// from kFirstForbidden on and in two runs of whole tiles, columns [256, 768) and 1024 columns from
// the middle of the shard on, in p.bias_values and in `bytes`, the bias of type `dtype`.
void forbid_tokens(LogpProblem& p, DType dtype, std::vector<std::uint8_t>& bytes, std::int64_t every);

}  // namespace shardjit::testing
