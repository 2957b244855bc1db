// Checks of a LinearLogp's outputs against the fp64 references (support/reference.hpp,
// support/grad_reference.hpp) with the gpu tests' tolerances, for the tests that check whole
// problems the same way (concurrency, graph capture).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/grad_reference.hpp"
#include "support/reference.hpp"

namespace shardjit::testing {

// Checks a forward's logp, lse and entropy (empty: not computed) of every row of p: each row
// written, ignored rows' logp 0, max |difference| under 2e-3 for each output and the relative
// norm of logp's under 1e-3; prints them under `label`.
void expect_outputs_match_reference(const LogpProblem& p, const std::vector<float>& logp, const std::vector<float>& lse,
                                    const std::vector<float>& entropy, const std::string& label);

// A backward's gradients copied back as bytes, in the dtypes `dtypes` says; bias null where the
// op has none.
struct WrittenGrads {
  const std::vector<std::uint8_t>& hidden;
  const std::vector<std::uint8_t>& weight;
  const std::vector<std::uint8_t>* bias;
  GradDtypes dtypes;
};

// Checks `grads` against the fp64 reference (reference_gradients of p, g, h; every weight row)
// within grad_tolerance of dZ's dtype `dtype` and each output's, and prints the relative norms
// under `label`.
void expect_grads_match_reference(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                  DType dtype, const WrittenGrads& grads, const std::string& label);

}  // namespace shardjit::testing
