// One LinearLogp backward call's arguments, checked: the first step of LinearLogp::backward.
#pragma once

#include <cstdint>

#include "runtime/ops/linear_logp/bwd/kernels.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

struct LinearLogpBwdState;

// What one backward call works on: its views (checked) and their row strides.
struct BackwardCall {
  const LinearLogpInputs& in;
  const LinearLogpGrads& grads;
  VectorView lse;
  VectorView entropy;       // data null unless grad_entropy is given
  VectorView grad_logp;     // data null: zero
  VectorView grad_lse;      // data null: zero
  VectorView grad_entropy;  // data null: zero
  std::int64_t n = 0;
  std::int64_t hidden_stride = 0;
  std::int64_t weight_stride = 0;
  std::int64_t grad_hidden_stride = 0;
  std::int64_t grad_weight_stride = 0;
  bool grad_hidden = false;
  bool grad_weight = false;
  bool grad_bias = false;
  // TP: whether grad_hidden is summed over the ranks (LinearLogpGrads::reduce_hidden).
  bool reduce_hidden = true;

  bool any_gradient() const { return grad_hidden || grad_weight || grad_bias; }
};

// Error(kInvalidArgument) unless the op was built with want_backward (its kernels are loaded).
void require_backward_kernels(const LinearLogpBwdState& bwd);

// Checks every view against the op's config and kernels (dtypes, shapes, strides, presence) and
// that no gradient overlaps another or an input; throws Error(kInvalidArgument) naming the view.
// grad_entropy needs an op built with want_entropy and the forward's entropy beside it; entropy
// without grad_entropy is checked and then not read.
BackwardCall check_backward_call(const LinearLogpConfig& config, const LinearLogpBwdKernels& kernels,
                                 const LinearLogpInputs& in, const LinearLogpBackwardInputs& backward_inputs,
                                 const LinearLogpGrads& grads);

// Accumulating into a 16-bit grad_weight (or grad_bias) rounds the running sum every call: said
// once per op, as a warning.
void warn_16bit_accumulation_once(LinearLogpBwdState& bwd, const BackwardCall& call);

}  // namespace shardjit
