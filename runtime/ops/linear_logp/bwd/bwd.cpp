// LinearLogp::backward, as the list of its steps (the steps are in bwd/steps.cpp): check the
// arguments, cut the vocabulary into chunks and reserve their buffers, take the chunks the last
// forward kept where this call may use them (keep.hpp), pick the dZ scale, then per chunk its dZ,
// bias sums, grad_weight and grad_hidden product, all on the caller's stream. No host
// synchronization (unless a buffer has to grow). A tensor-parallel op accumulates grad_hidden in
// fp32 and all-reduces it while the last chunk's grad_weight runs (tp_backward_plan in
// runtime/ops/linear_logp/tp/plan.hpp).
#include <optional>
#include <string>
#include <utility>

#include "runtime/driver/stream.hpp"
#include "runtime/ops/linear_logp/bwd/call.hpp"
#include "runtime/ops/linear_logp/bwd/steps.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
#include "runtime/ops/linear_logp/keep.hpp"
#include "runtime/ops/linear_logp/tp/plan.hpp"
#include "runtime/ops/linear_logp/tp/tp.hpp"
#include "shardjit/error.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {
namespace {

// What a backward call is matched against the kept chunks with (BackwardKeptMatch), its buffers
// as reserved, `grew` and `released` saying which of them its reserve grew or freed.
BackwardKeptMatch kept_match(const BackwardCall& call, const LinearLogpBwdState& bwd, bool dz_buffer_grew,
                             bool accumulator_grew, bool keep_buffer_released, CUstream stream) {
  BackwardKeptMatch match;
  match.hidden = call.in.hidden.data;
  match.weight = call.in.weight.data;
  match.bias = bwd.layout.config.bias_dtype ? call.in.bias.data : nullptr;
  match.lse = static_cast<const float*>(call.lse.data);
  match.n = call.n;
  match.hidden_stride = call.hidden_stride;
  match.weight_stride = call.weight_stride;
  match.grad_hidden = call.grad_hidden;
  match.capture = stream_capture_id(stream);
  match.dz_buffer = bwd.dz_buffer.as<void>();
  match.dz_buffer_grew = dz_buffer_grew;
  match.accumulator = bwd.accumulator.as<void>();
  match.accumulator_grew = accumulator_grew;
  match.keep_buffer = bwd.keep_buffer.as<void>();
  match.keep_buffer_released = keep_buffer_released;
  return match;
}

// The call's chunks, the buffers reserved for them, and the kept chunks (`kept`, taken from the
// op) that it uses.
BackwardPass prepare_pass(LinearLogp::Impl& op, const BackwardCall& call, const KeptChunk* kept, CUstream stream) {
  LinearLogpBwdState& bwd = op.bwd;
  BackwardPass pass(call, bwd);
  pass.tp_reduce = op.tp != nullptr && call.grad_hidden && call.n > 0 && call.reduce_hidden;
  pass.chunks = bwd.chunks_on(call.n, call.grad_hidden, stream);
  if (pass.tp_reduce) pass.chunks.accumulator_bytes = static_cast<std::size_t>(op.tp->accumulator_bytes(call.n));
  if (op.tp && (pass.chunks.dz_bytes > bwd.dz_buffer.bytes() ||
                pass.chunks.accumulator_bytes > bwd.accumulator.bytes() || pass.chunks.mask_bytes > bwd.mask.bytes())) {
    op.tp->before_growth(stream, "backward buffers");  // bounds the wait reserve() does
  }
  const std::size_t dz_bytes = bwd.dz_buffer.bytes();
  const std::size_t accumulator_bytes = bwd.accumulator.bytes();
  const BufferReleases released = bwd.reserve(pass.chunks, stream);
  bwd.reserve_split(pass.chunks, call.n, stream);
  if (kept != nullptr && call.n > 0) {
    pass.kept = kept;
    pass.kept_use = usable_kept_chunks(
        *kept, pass.chunks,
        kept_match(call, bwd, released.dz || bwd.dz_buffer.bytes() != dz_bytes,
                   bwd.accumulator.bytes() != accumulator_bytes, released.keep, stream));
  }
  return pass;
}

// The TP backward plan's launch steps (tp_backward_plan); the TP state does the all-reduce.
class TpBackwardLaunches final : public PlanActions {
 public:
  explicit TpBackwardLaunches(const BackwardPass& pass) : pass_(pass) {}

  void launch(int action, CUstream stream) override {
    const std::int64_t last = pass_.chunks.chunks - 1;
    if (action == kTpBackwardChunks) {
      for (std::int64_t index = 0; index < last; ++index) enqueue_chunk(pass_, index, kChunkAll, stream);
      enqueue_chunk(pass_, last, kChunkDz | kChunkHidden, stream);
    } else if (action == kTpBackwardLastWeight) {
      enqueue_chunk(pass_, last, kChunkBias | kChunkWeight, stream);
    } else if (action == kTpRoundGradHidden) {
      enqueue_round_grad_hidden(pass_, stream);
    } else {
      throw Error(ErrorCode::kInternal, "TP backward: unknown launch action " + std::to_string(action));
    }
  }

  void collective(int action, CUstream) override {
    throw Error(ErrorCode::kInternal, "backward launches: unexpected collective " + std::to_string(action));
  }

 private:
  const BackwardPass& pass_;
};

}  // namespace

void LinearLogp::backward(const LinearLogpInputs& in, const VectorView& lse, const VectorView& grad_logp,
                          const VectorView& grad_lse, const LinearLogpGrads& grads, StreamHandle stream_handle) {
  backward(in, LinearLogpBackwardInputs{lse, {}, grad_logp, grad_lse, {}}, grads, stream_handle);
}

void LinearLogp::backward(const LinearLogpInputs& in, const LinearLogpBackwardInputs& backward_inputs,
                          const LinearLogpGrads& grads, StreamHandle stream_handle) {
  Impl& op = *impl_;
  const SingleCaller::Scope one_caller(op.calls, "LinearLogp::backward");
  require_backward_kernels(op.bwd);
  const BackwardCall call = check_backward_call(op.layout.config, *op.bwd.specs, in, backward_inputs, grads);
  if (!call.any_gradient()) return;
  warn_16bit_accumulation_once(op.bwd, call);

  const auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  // What the op's last forward kept; taken here, before anything can fail, since the chunks after
  // them write over them: this call uses them up.
  const std::optional<KeptChunk> kept = std::exchange(op.bwd.kept, std::nullopt);
  BackwardPass pass = prepare_pass(op, call, kept ? &*kept : nullptr, stream);
  pass.scale = enqueue_dz_scale(op.bwd, call, stream);
  if (!pass.tp_reduce) {
    enqueue_all_chunks(pass, stream);
    return;
  }
  TpBackwardLaunches launches(pass);
  op.tp->backward(launches, op.bwd.accumulator.as<float>(), call.n * op.layout.config.hidden, stream);
}

}  // namespace shardjit
