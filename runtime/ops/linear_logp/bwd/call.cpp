#include "runtime/ops/linear_logp/bwd/call.hpp"

#include "runtime/logging.hpp"
#include "runtime/ops/linear_logp/bwd/state.hpp"
#include "runtime/ops/view_checks.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

void require_backward_kernels(const LinearLogpBwdState& bwd) {
  if (!bwd.loaded()) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp::backward: the op was built with want_backward = false, so its backward kernels "
                "were not loaded; set LinearLogpConfig::want_backward");
  }
}

namespace {

// The inputs' views: the forward's, lse and the upstream gradients.
void check_inputs(const LinearLogpConfig& c, BackwardCall& call) {
  const LinearLogpInputs& in = call.in;
  call.n = in.hidden.rows;
  call.hidden_stride = check_matrix(in.hidden, "hidden", c.dtype, -1, c.hidden);
  call.weight_stride = check_matrix(in.weight, "weight", c.dtype, c.vocab_local, c.hidden);
  if (c.bias_dtype) {
    check_vector(in.bias, "bias", *c.bias_dtype, c.vocab_local, false);
  } else if (in.bias.data != nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "bias: given, but the op was built without bias_dtype");
  }
  check_vector(in.targets, "targets", c.target_dtype, call.n, false);
  check_vector(call.lse, "lse", DType::kFP32, call.n, false);
  check_vector(call.grad_logp, "grad_logp", DType::kFP32, call.n, true);
  check_vector(call.grad_lse, "grad_lse", DType::kFP32, call.n, true);
  const bool entropy = check_vector(call.entropy, "entropy", DType::kFP32, call.n, true);
  const bool grad_entropy = check_vector(call.grad_entropy, "grad_entropy", DType::kFP32, call.n, true);
  if (grad_entropy && !c.want_entropy) {
    throw Error(ErrorCode::kInvalidArgument,
                "grad_entropy: given, but the op was built with want_entropy = false, so its forward gives no "
                "entropy for the gradient to use; build it with LinearLogpConfig::want_entropy");
  }
  if (grad_entropy && !entropy) {
    throw Error(ErrorCode::kInvalidArgument,
                "entropy: required with grad_entropy (the forward's entropy output for these inputs), but its data is "
                "null");
  }
  // Only the entropy term reads it.
  if (!grad_entropy) call.entropy = VectorView{};
}

// The gradients' views, each optional.
void check_grads(const LinearLogpConfig& c, const LinearLogpBwdKernels& k, BackwardCall& call) {
  const LinearLogpGrads& grads = call.grads;
  if (grads.hidden.data != nullptr) {
    call.grad_hidden = true;
    call.grad_hidden_stride = check_matrix(grads.hidden, "grad_hidden", c.dtype, call.n, c.hidden);
  }
  if (grads.weight.data != nullptr) {
    call.grad_weight = true;
    call.grad_weight_stride = check_matrix(grads.weight, "grad_weight", k.grad_weight_dtype, c.vocab_local, c.hidden);
  }
  if (grads.bias.data != nullptr) {
    if (!k.grad_bias_dtype) {
      throw Error(ErrorCode::kInvalidArgument, "grad_bias: given, but the op was built without bias_dtype");
    }
    call.grad_bias = check_vector(grads.bias, "grad_bias", *k.grad_bias_dtype, c.vocab_local, false);
  }
}

}  // namespace

BackwardCall check_backward_call(const LinearLogpConfig& c, const LinearLogpBwdKernels& k, const LinearLogpInputs& in,
                                 const LinearLogpBackwardInputs& b, const LinearLogpGrads& grads) {
  BackwardCall call{in, grads, b.lse, b.entropy, b.grad_logp, b.grad_lse, b.grad_entropy};
  call.reduce_hidden = grads.reduce_hidden;
  check_inputs(c, call);
  check_grads(c, k, call);
  // A gradient written over an input (grad_hidden over hidden, say) would change what later
  // chunks read.
  check_no_overlap({span_of("grad_hidden", grads.hidden), span_of("grad_weight", grads.weight),
                    span_of("grad_bias", grads.bias)},
                   {span_of("hidden", in.hidden), span_of("weight", in.weight), span_of("bias", in.bias),
                    span_of("targets", in.targets), span_of("lse", b.lse), span_of("entropy", call.entropy),
                    span_of("grad_logp", b.grad_logp), span_of("grad_lse", b.grad_lse),
                    span_of("grad_entropy", b.grad_entropy)});
  return call;
}

void warn_16bit_accumulation_once(LinearLogpBwdState& bwd, const BackwardCall& call) {
  const LinearLogpConfig& c = bwd.layout.config;
  // grad_weight is kept in config.dtype and grad_bias in config.bias_dtype, unless grad_weight_fp32.
  const bool weight_16bit = call.grad_weight && c.dtype != DType::kFP32;
  const bool bias_16bit = call.grad_bias && c.bias_dtype && *c.bias_dtype != DType::kFP32;
  if (call.grads.accumulate && !c.grad_weight_fp32 && (weight_16bit || bias_16bit) &&
      !bwd.warned_16bit_accumulation.exchange(true)) {
    log().warn("LinearLogp::backward accumulates {} in {}: each call rounds the running sum to it, so many "
               "micro-batches lose the small terms; set LinearLogpConfig::grad_weight_fp32 for an fp32 running "
               "sum (said once per op)",
               weight_16bit ? "grad_weight" : "grad_bias", dtype_name(weight_16bit ? c.dtype : *c.bias_dtype));
  }
}

}  // namespace shardjit
