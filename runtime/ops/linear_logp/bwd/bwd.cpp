// LinearLogp::backward: checks the views, plans the vocabulary chunks, then per chunk enqueues
// on the caller's stream the dZ kernel (or the kept chunk's dZ), the bias column sums,
// grad_weight = dZ^T X and grad_hidden += dZ W; chunk 1 first where the forward kept it in the
// accumulator. No host synchronization (unless a buffer has to grow). A tensor-parallel
// op accumulates grad_hidden in fp32 and all-reduces it while the last chunk's grad_weight runs
// (tp_backward_plan in runtime/ops/linear_logp/tp/plan.hpp).
#include <algorithm>
#include <optional>
#include <utility>

#include "runtime/driver/stream.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/bias.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/bwd/scale.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
#include "runtime/ops/linear_logp/tp/tp.hpp"
#include "runtime/ops/linear_logp/tp/plan.hpp"
#include "runtime/ops/view_checks.hpp"
#include "shardjit/error.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {
namespace {

// What one call works on, checked.
struct BwdCall {
  std::int64_t n = 0;
  std::int64_t hidden_stride = 0;
  std::int64_t weight_stride = 0;
  std::int64_t grad_hidden_stride = 0;
  std::int64_t grad_weight_stride = 0;
  bool grad_hidden = false;
  bool grad_weight = false;
  bool grad_bias = false;
};

BwdCall check_call(const LinearLogpConfig& c, const LinearLogpBwdKernels& k, const LinearLogpInputs& in,
                   const VectorView& lse, const VectorView& grad_logp, const VectorView& grad_lse,
                   const LinearLogpGrads& grads) {
  BwdCall call;
  call.n = in.hidden.rows;
  call.hidden_stride = check_matrix(in.hidden, "hidden", c.dtype, -1, c.hidden);
  call.weight_stride = check_matrix(in.weight, "weight", c.dtype, c.vocab_local, c.hidden);
  if (c.bias_dtype) {
    check_vector(in.bias, "bias", *c.bias_dtype, c.vocab_local, false);
  } else if (in.bias.data != nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "bias: given, but the op was built without bias_dtype");
  }
  check_vector(in.targets, "targets", c.target_dtype, call.n, false);
  check_vector(lse, "lse", DType::kFP32, call.n, false);
  check_vector(grad_logp, "grad_logp", DType::kFP32, call.n, true);
  check_vector(grad_lse, "grad_lse", DType::kFP32, call.n, true);
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
  // A gradient written over an input (grad_hidden over hidden, say) would change what later
  // chunks read.
  check_no_overlap({span_of("grad_hidden", grads.hidden), span_of("grad_weight", grads.weight),
                    span_of("grad_bias", grads.bias)},
                   {span_of("hidden", in.hidden), span_of("weight", in.weight), span_of("bias", in.bias),
                    span_of("targets", in.targets), span_of("lse", lse), span_of("grad_logp", grad_logp),
                    span_of("grad_lse", grad_lse)});
  return call;
}

// Whether `kept` is this call's first chunk: kept by the forward of these buffers (lse its output)
// and rows, as wide as this call's first chunk, in the dZ buffer as it is now.
bool holds_first_chunk(const KeptChunk& kept, const LinearLogpInputs& in, const void* bias, const VectorView& lse,
                       const BwdCall& call, std::int64_t chunk_cols, const void* dz_buffer) {
  return kept.hidden == in.hidden.data && kept.weight == in.weight.data && kept.bias == bias &&
         kept.lse == lse.data && kept.n == call.n && kept.hidden_stride == call.hidden_stride &&
         kept.weight_stride == call.weight_stride && kept.cols == chunk_cols && kept.dz == dz_buffer;
}

template <class T = void>
T* offset(void* base, std::int64_t elements, DType dtype) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + elements * static_cast<std::int64_t>(dtype_size(dtype)));
}

std::int64_t round_up8(std::int64_t x) { return (x + 7) / 8 * 8; }

// The launches of one vocabulary chunk, as bits: a single-GPU call enqueues all of them, in
// this order; a TP call splits the last chunk around the all-reduce.
enum ChunkPart : unsigned {
  kChunkDz = 1u,
  kChunkBias = 2u,
  kChunkWeight = 4u,
  kChunkHidden = 8u,
  kChunkAll = 15u,
};

// Adapts a callable (int action, CUstream) to the scheduler's actions; a backward has no
// collective of its own (the TP state does the all-reduce).
template <class Launch>
class LaunchActions final : public PlanActions {
 public:
  explicit LaunchActions(Launch& launch) : launch_(launch) {}
  void launch(int action, CUstream stream) override { launch_(action, stream); }
  void collective(int action, CUstream) override {
    throw Error(ErrorCode::kInternal, "backward launches: unexpected collective " + std::to_string(action));
  }

 private:
  Launch& launch_;
};

}  // namespace

void LinearLogp::backward(const LinearLogpInputs& in, const VectorView& lse, const VectorView& grad_logp,
                          const VectorView& grad_lse, const LinearLogpGrads& grads, StreamHandle stream_handle) {
  Impl& op = *impl_;
  const SingleCaller::Scope one_caller(op.calls, "LinearLogp::backward");
  LinearLogpBwdState& bwd = op.bwd;
  const LinearLogpConfig& c = op.layout.config;
  if (!bwd.loaded()) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp::backward: the op was built with want_backward = false, so its backward kernels "
                "were not loaded; set LinearLogpConfig::want_backward");
  }
  const LinearLogpBwdKernels& k = *bwd.specs;
  const BwdCall call = check_call(c, k, in, lse, grad_logp, grad_lse, grads);
  if (!call.grad_hidden && !call.grad_weight && !call.grad_bias) return;
  const std::int64_t n = call.n;
  // grad_weight is kept in config.dtype and grad_bias in config.bias_dtype, unless grad_weight_fp32.
  const bool weight_16bit = call.grad_weight && c.dtype != DType::kFP32;
  const bool bias_16bit = call.grad_bias && c.bias_dtype && *c.bias_dtype != DType::kFP32;
  if (grads.accumulate && !c.grad_weight_fp32 && (weight_16bit || bias_16bit) &&
      !bwd.warned_16bit_accumulation.exchange(true)) {
    log().warn("LinearLogp::backward accumulates {} in {}: each call rounds the running sum to it, so many "
               "micro-batches lose the small terms; set LinearLogpConfig::grad_weight_fp32 for an fp32 running "
               "sum (said once per op)",
               weight_16bit ? "grad_weight" : "grad_bias", dtype_name(weight_16bit ? c.dtype : *c.bias_dtype));
  }

  auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  // The chunks' logits the op's last forward kept; taken here, before anything can fail, since
  // the chunks after them write over them: this call uses them up.
  const std::optional<KeptChunk> kept = std::exchange(bwd.kept, std::nullopt);
  // TP: grad_hidden is the sum over the ranks' shards; every term goes into the fp32
  // accumulator, which is all-reduced and then rounded into grad_hidden.
  const bool tp_reduce = op.tp != nullptr && call.grad_hidden && n > 0;
  BwdChunkPlan plan = bwd.plan(n, call.grad_hidden);
  if (tp_reduce) plan.accumulator_bytes = static_cast<std::size_t>(op.tp->accumulator_bytes(n));
  if (op.tp && (plan.dz_bytes > bwd.dz_buffer.bytes() || plan.accumulator_bytes > bwd.accumulator.bytes() ||
                plan.mask_bytes > bwd.mask.bytes())) {
    op.tp->before_growth(stream, "backward buffers");  // bounds the wait reserve() does
  }
  // A growth below loses what was kept.
  const std::size_t dz_bytes_kept = bwd.dz_buffer.bytes();
  const std::size_t accumulator_bytes_kept = bwd.accumulator.bytes();
  bwd.reserve(plan, stream);
  bwd.reserve_split(plan, n, stream);
  const bool filter = c.grad_filter_threshold > 0.0f;
  const FwdTile& dz_tile = k.dz_tile;
  // Used where they are these inputs', the dZ buffer kept them, and the forward was enqueued in
  // this call's capture sequence (or both in none, KeptChunk::capture).
  const bool use_kept = kept && n > 0 && bwd.dz_buffer.bytes() == dz_bytes_kept &&
                        kept->capture == stream_capture_id(stream) &&
                        holds_first_chunk(*kept, in, c.bias_dtype ? in.bias.data : nullptr, lse, call,
                                          plan.chunk(0).cols, bwd.dz_buffer.as<void>());
  // The second chunk, in the accumulator's memory (BwdChunkPlan::kept_band_rows): its
  // grad_hidden product is the call's first, in bands, so that chunk 0's follows it and adds.
  const bool use_second = use_kept && kept->second != nullptr && bwd.accumulator.bytes() == accumulator_bytes_kept &&
                          kept->accumulator == bwd.accumulator.as<void>() && plan.chunks >= 3 &&
                          plan.chunk(1).cols == kept->cols && (!call.grad_hidden || plan.kept_band_rows > 0);
  const std::int64_t first_hidden_chunk = use_second ? 1 : 0;

  // 16-bit dZ is stored times s; the GEMMs and the bias sums multiply by 1 / s.
  const float* scale = nullptr;
  const float* inv_scale = nullptr;
  if (bwd.scale && n > 0) {
    kernels::LinearLogpBwdScaleArgs args{};
    args.grad_logp = static_cast<const float*>(grad_logp.data);
    args.grad_lse = static_cast<const float*>(grad_lse.data);
    args.scale = bwd.scale_buffer.as<float>();
    args.n_rows = n;
    args.inv_temperature = 1.0f / c.temperature;
    launch_linear_logp_bwd_scale(*bwd.scale, args, stream);
    scale = bwd.scale_buffer.as<float>();
    inv_scale = scale + 1;
  }

  auto enqueue_chunk = [&](std::int64_t index, unsigned parts) {
    const BwdChunk chunk = plan.chunk(index);
    const bool first = index == first_hidden_chunk;
    const bool last = index + 1 == plan.chunks;
    const bool kept_chunk = (index == 0 && use_kept) || (index == 1 && use_second);
    const std::int64_t mask_stride = (chunk.cols + dz_tile.bn - 1) / dz_tile.bn;
    // The chunk's dZ: in the dZ buffer, or for the second kept chunk where it was kept.
    void* const dz_of_chunk = index == 1 && use_second ? kept->second : bwd.dz_buffer.as<void>();

    kernels::LinearLogpBwdDzArgs dz = chunk_logit_args(c, in, n, call.hidden_stride, call.weight_stride, dz_of_chunk,
                                                       plan.dz_stride, chunk.begin, chunk.cols);
    dz.lse = static_cast<const float*>(lse.data);
    dz.grad_logp = static_cast<const float*>(grad_logp.data);
    dz.grad_lse = static_cast<const float*>(grad_lse.data);
    dz.scale = scale;
    dz.tile_mask = filter ? bwd.mask.as<unsigned char>() : nullptr;
    dz.filter_threshold = c.grad_filter_threshold;
    if ((parts & kChunkDz) && kept_chunk) {
      dz.tile_partials = kept->partials + chunk.begin / dz_tile.bn * n;
      launch_linear_logp_bwd_kept_dz(*bwd.kept_dz, dz, stream);
    } else if (parts & kChunkDz) {
      launch_linear_logp_bwd_dz(*bwd.dz, dz, op.layout, dz_tile, k.dz_dtype, bwd.split, stream);
    }

    if (call.grad_bias && (parts & kChunkBias)) {
      kernels::LinearLogpBwdBiasArgs args{};
      args.dz = dz_of_chunk;
      args.out = offset(grads.bias.data, chunk.begin, *k.grad_bias_dtype);
      args.addend = grads.accumulate ? args.out : nullptr;
      args.alpha = inv_scale;
      args.n_rows = n;
      args.dz_stride = plan.dz_stride;
      args.cols = static_cast<int>(chunk.cols);
      launch_linear_logp_bwd_bias(*bwd.bias, args, stream);
    }

    // Both GEMMs read dZ of the chunk: [n rows][chunk.cols], zeros up to a multiple of 8.
    kernels::GemmArgs gemm{};
    gemm.a = dz_of_chunk;
    gemm.a_stride = plan.dz_stride;
    gemm.a_cols = round_up8(chunk.cols);
    gemm.alpha = inv_scale;
    gemm.mask = filter ? bwd.mask.as<unsigned char>() : nullptr;
    gemm.mask_stride = mask_stride;
    gemm.mask_block_rows = dz_tile.bm;
    gemm.mask_block_cols = dz_tile.bn;
    gemm.n = c.hidden;

    if (call.grad_weight && (parts & kChunkWeight)) {
      kernels::GemmArgs w = gemm;  // grad_weight[chunk] = dZ^T X over all rows, in one product
      w.b = in.hidden.data;
      w.b_stride = call.hidden_stride;
      w.b_rows = n;
      w.out = offset(grads.weight.data, chunk.begin * call.grad_weight_stride, k.grad_weight_dtype);
      w.out_stride = call.grad_weight_stride;
      w.addend = grads.accumulate ? w.out : nullptr;
      w.addend_stride = call.grad_weight_stride;
      w.m = chunk.cols;
      w.k = n;
      launch_gemm(*bwd.grad_weight, w, k.grad_weight_kind, k.gemm_tile, bwd.split, stream);
    }

    if (call.grad_hidden && n > 0 && (parts & kChunkHidden)) {
      kernels::GemmArgs h = gemm;  // grad_hidden (+)= dZ W[chunk]
      h.b = offset(in.weight.data, chunk.begin * call.weight_stride, c.dtype);
      h.b_stride = call.weight_stride;
      // Padding rows of W hold no data (possibly not even numbers): they read as zeros.
      h.b_rows = std::clamp<std::int64_t>(op.layout.valid_local - chunk.begin, 0, chunk.cols);
      h.m = n;
      h.k = chunk.cols;
      // Into the fp32 accumulator until the last chunk, which writes grad_hidden; an fp32 op
      // accumulates in grad_hidden itself. TP: always into the accumulator (see above).
      const bool in_place = c.dtype == DType::kFP32 && !tp_reduce;
      const bool direct = !tp_reduce && (last || in_place);
      void* acc = in_place ? grads.hidden.data : bwd.accumulator.as<void>();
      const std::int64_t acc_stride = in_place ? call.grad_hidden_stride : c.hidden;
      h.out = direct ? grads.hidden.data : acc;
      h.out_stride = direct ? call.grad_hidden_stride : acc_stride;
      h.addend = first ? nullptr : acc;
      h.addend_stride = acc_stride;
      if (index == 1 && use_second) {
        // Over the chunk's own logits, band after band (see BwdChunkPlan::kept_band_rows). No
        // filter mask to move with the rows: an op with a filter keeps nothing (keeps_first_chunk).
        for (std::int64_t row = 0; row < n; row += plan.kept_band_rows) {
          kernels::GemmArgs band = h;
          band.a = offset(dz_of_chunk, row * plan.dz_stride, k.dz_dtype);
          band.m = std::min(plan.kept_band_rows, n - row);
          band.out = offset(h.out, row * acc_stride, DType::kFP32);
          launch_gemm(*bwd.grad_hidden_acc, band, k.grad_hidden_acc_kind, k.gemm_tile, bwd.split, stream);
        }
      } else if (direct) {
        launch_gemm(*bwd.grad_hidden_out, h, k.grad_hidden_out_kind, k.gemm_tile, bwd.split, stream);
      } else {
        launch_gemm(*bwd.grad_hidden_acc, h, k.grad_hidden_acc_kind, k.gemm_tile, bwd.split, stream);
      }
    }
  };

  if (!tp_reduce) {
    enqueue_chunk(first_hidden_chunk, kChunkAll);
    for (std::int64_t index = 0; index < plan.chunks; ++index) {
      if (index != first_hidden_chunk) enqueue_chunk(index, kChunkAll);
    }
    return;
  }

  // TP (tp_backward_plan): the launches of the plan's steps; the TP state all-reduces.
  const std::int64_t last = plan.chunks - 1;
  auto tp_launch = [&](int action, CUstream) {
    if (action == kTpBackwardChunks) {
      for (std::int64_t index = 0; index < last; ++index) enqueue_chunk(index, kChunkAll);
      enqueue_chunk(last, kChunkDz | kChunkHidden);
    } else if (action == kTpBackwardLastWeight) {
      enqueue_chunk(last, kChunkBias | kChunkWeight);
    } else if (action == kTpRoundGradHidden) {
      // grad_hidden = the reduced accumulator: the GEMM with k = 0 is a rounding copy
      // (out = 0 + addend).
      kernels::GemmArgs r{};
      r.a = bwd.dz_buffer.as<void>();
      r.a_stride = plan.dz_stride;
      r.a_cols = 8;
      r.b = in.weight.data;
      r.b_stride = call.weight_stride;
      r.out = grads.hidden.data;
      r.out_stride = call.grad_hidden_stride;
      r.addend = bwd.accumulator.as<void>();
      r.addend_stride = c.hidden;
      r.mask_stride = 1;
      r.mask_block_rows = dz_tile.bm;
      r.mask_block_cols = dz_tile.bn;
      r.m = n;
      r.n = c.hidden;
      launch_gemm(*bwd.grad_hidden_out, r, k.grad_hidden_out_kind, k.gemm_tile, bwd.split, stream);
    } else {
      throw Error(ErrorCode::kInternal, "TP backward: unknown launch action " + std::to_string(action));
    }
  };
  LaunchActions<decltype(tp_launch)> launches(tp_launch);
  op.tp->backward(launches, bwd.accumulator.as<float>(), n * c.hidden, stream);
}

}  // namespace shardjit
