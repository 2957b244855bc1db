// fp64 reference gradients of LinearLogp's backward and the measures the GPU tests compare them
// with, shared by every test that checks a backward against the CPU (the backward suite,
// concurrency, graph capture).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "shardjit/dtype.hpp"
#include "support/reference.hpp"

namespace shardjit::testing {

// Device bytes of `count` elements of `dtype` (bf16, fp16 or fp32) as floats.
std::vector<float> to_floats(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t count);

// fp64 gradients of a one-shard problem (its weight rows are global ids vocab_start on) for
// upstream gradients g (of logp), h (of lse) and e (of the entropy H), 0 where absent:
// dz_iv = (g_i [v = t_i] + (h_i - g_i) p_iv - e_i p_iv (z_iv - (lse_i - H_i))) / T over the
// shard's valid columns of rows with a valid target, p, lse and H computed here in fp64;
// dX = dZ W, dW = dZ^T X, db = sum_i dZ.
struct ReferenceGrads {
  std::vector<double> dx, dw, db;  // [n][H], [rows of dW][H], [V]
};

// Computed on all cores. dW only on the vocabulary rows `dw_rows`, in that order (a sample keeps
// large vocabularies cheap), or on every row when it is empty.
ReferenceGrads reference_gradients(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                   const std::vector<std::int64_t>& dw_rows = {});
// With the entropy's upstream gradient e ([n], or empty: none).
ReferenceGrads reference_gradients(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                   const std::vector<float>& e, const std::vector<std::int64_t>& dw_rows);

// ||out - ref|| / ||ref||, or infinity when an element is not finite (not written).
double rel_norm(const std::vector<float>& out, const std::vector<double>& ref);

// The relative-norm bound of the backward tests: the coarser of dZ's type and the output's.
double grad_tolerance(DType dz, DType out);

// The dtypes a backward writes its gradients in: hidden's dtype for grad_hidden; the weight's
// (bias's) for grad_weight (grad_bias), or fp32 with LinearLogpConfig::grad_weight_fp32.
struct GradDtypes {
  DType hidden, weight, bias;
};
GradDtypes grad_dtypes(DType dtype, std::optional<DType> bias, bool grad_weight_fp32);

}  // namespace shardjit::testing
