#include "runtime/ops/linear_logp/bwd/steps.hpp"

#include <algorithm>

#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/bias.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/bwd/scale.hpp"

namespace shardjit {
namespace {

template <class T = void>
T* offset(void* base, std::int64_t elements, DType dtype) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + elements * static_cast<std::int64_t>(dtype_size(dtype)));
}

std::int64_t round_up8(std::int64_t x) { return (x + 7) / 8 * 8; }

bool filters(const BackwardPass& pass) { return pass.bwd.layout.config.grad_filter_threshold > 0.0f; }

// Where chunk `index`'s dZ is: the dZ buffer, or for a kept chunk past the first where it was
// kept (the accumulator's end, the keep buffer).
void* chunk_dz_buffer(const BackwardPass& pass, std::int64_t index) {
  if (index == 0 || !pass.kept_use.uses(index)) return pass.bwd.dz_buffer.as<void>();
  if (index == 1 && pass.kept_use.second) return pass.kept->second;
  const std::size_t further = static_cast<std::size_t>(index - pass.kept_use.further_begin);
  return static_cast<char*>(pass.kept->further) + further * kept_chunk_bytes(pass.chunks, pass.call.n);
}

// What both GEMMs of a chunk share: A is the chunk's dZ, [n rows][chunk.cols], zeros up to a
// multiple of 8, times 1 / s; the filter mask, where there is one, skips its dropped tiles.
kernels::GemmArgs chunk_gemm_args(const BackwardPass& pass, std::int64_t index) {
  const BackwardChunk chunk = pass.chunks.chunk(index);
  const FwdTile& dz_tile = pass.bwd.specs->dz_tile;
  kernels::GemmArgs gemm{};
  gemm.a = chunk_dz_buffer(pass, index);
  gemm.a_stride = pass.chunks.dz_stride;
  gemm.a_cols = round_up8(chunk.cols);
  gemm.alpha = pass.inv_scale();
  gemm.mask = filters(pass) ? pass.bwd.mask.as<unsigned char>() : nullptr;
  gemm.mask_stride = (chunk.cols + dz_tile.bn - 1) / dz_tile.bn;
  gemm.mask_block_rows = dz_tile.bm;
  gemm.mask_block_cols = dz_tile.bn;
  gemm.n = pass.bwd.layout.config.hidden;
  return gemm;
}

// grad_hidden's product `h` into the fp32 accumulator (or an fp32 op's grad_hidden), or with
// `out` into grad_hidden in the op's dtype: on the tiles that take the rows as N where the rule
// finds them faster (LinearLogpBwdState::grad_hidden_rows_as_n_rows), else on the 128 x 256 tiles.
void launch_grad_hidden(const BackwardPass& pass, const kernels::GemmArgs& h, bool out, CUstream stream) {
  LinearLogpBwdState& bwd = pass.bwd;
  const LinearLogpBwdKernels& k = *bwd.specs;
  const GemmKind& kind = out ? k.grad_hidden_out_kind : k.grad_hidden_acc_kind;
  const int bm = bwd.grad_hidden_rows_as_n_rows(h.m, h.k);
  for (const LinearLogpBwdState::RowsAsNKernels& tile : bwd.grad_hidden_rows_as_n) {
    if (tile.bm != bm) continue;
    launch_gemm(out ? *tile.out : *tile.acc, h, kind, gemm_rows_as_n_tile(bm), bwd.split, stream);
    return;
  }
  launch_gemm(out ? *bwd.grad_hidden_out : *bwd.grad_hidden_acc, h, kind, k.gemm_tile, bwd.split, stream);
}

// The second kept chunk's grad_hidden product (`h`, into the accumulator), band after band of
// BackwardChunks::kept_band_rows rows: each band writes fp32 rows over logits that earlier bands
// have read. No filter mask to move with the rows: an op with a filter keeps nothing
// (op_keeps_chunks).
void enqueue_grad_hidden_in_bands(const BackwardPass& pass, const kernels::GemmArgs& h, std::int64_t acc_stride,
                                  CUstream stream) {
  const LinearLogpBwdKernels& k = *pass.bwd.specs;
  const std::int64_t n = pass.call.n;
  const std::int64_t band_rows = pass.chunks.kept_band_rows;
  for (std::int64_t row = 0; row < n; row += band_rows) {
    kernels::GemmArgs band = h;
    band.a = offset(pass.kept->second, row * pass.chunks.dz_stride, k.dz_dtype);
    band.m = std::min(band_rows, n - row);
    band.out = offset(h.out, row * acc_stride, DType::kFP32);
    launch_grad_hidden(pass, band, false, stream);
  }
}

}  // namespace

const float* enqueue_dz_scale(LinearLogpBwdState& bwd, const BackwardCall& call, CUstream stream) {
  if (!bwd.scale || call.n == 0) return nullptr;
  kernels::LinearLogpBwdScaleArgs args{};
  args.grad_logp = static_cast<const float*>(call.grad_logp.data);
  args.grad_lse = static_cast<const float*>(call.grad_lse.data);
  args.grad_entropy = static_cast<const float*>(call.grad_entropy.data);
  args.entropy = static_cast<const float*>(call.entropy.data);
  args.scale = bwd.scale_buffer.as<float>();
  args.n_rows = call.n;
  args.inv_temperature = 1.0f / bwd.layout.config.temperature;
  launch_linear_logp_bwd_scale(*bwd.scale, args, stream);
  return bwd.scale_buffer.as<float>();
}

void enqueue_chunk_dz(const BackwardPass& pass, std::int64_t index, CUstream stream) {
  const BackwardCall& call = pass.call;
  LinearLogpBwdState& bwd = pass.bwd;
  const BackwardChunk chunk = pass.chunks.chunk(index);
  kernels::LinearLogpBwdDzArgs dz =
      chunk_logit_args(bwd.layout, call.in, call.n, call.hidden_stride, call.weight_stride,
                       chunk_dz_buffer(pass, index), pass.chunks.dz_stride, chunk.begin, chunk.cols);
  dz.lse = static_cast<const float*>(call.lse.data);
  dz.grad_logp = static_cast<const float*>(call.grad_logp.data);
  dz.grad_lse = static_cast<const float*>(call.grad_lse.data);
  dz.grad_entropy = static_cast<const float*>(call.grad_entropy.data);
  dz.entropy = static_cast<const float*>(call.entropy.data);
  dz.scale = pass.scale;
  dz.tile_mask = filters(pass) ? bwd.mask.as<unsigned char>() : nullptr;
  dz.filter_threshold = bwd.layout.config.grad_filter_threshold;
  if (pass.kept_use.uses(index)) {
    // The kept logits turn into dZ in place, relative to their tiles' maxima.
    const int tile_cols = pass.kept->tile_cols;
    dz.tile_partials = pass.kept->partials + chunk.begin / tile_cols * call.n;
    const LoadedKernel& kept_dz = tile_cols == bwd.specs->dz_tile.bn ? *bwd.kept_dz : *bwd.kept_dz_columns;
    launch_linear_logp_bwd_kept_dz(kept_dz, dz, bwd.device.info().sm_count, stream);
  } else {
    launch_linear_logp_bwd_dz(*bwd.dz, dz, bwd.layout, bwd.specs->dz_tile, bwd.specs->dz_dtype, bwd.split, stream);
  }
}

void enqueue_chunk_bias_sums(const BackwardPass& pass, std::int64_t index, CUstream stream) {
  const LinearLogpGrads& grads = pass.call.grads;
  const BackwardChunk chunk = pass.chunks.chunk(index);
  kernels::LinearLogpBwdBiasArgs args{};
  args.dz = chunk_dz_buffer(pass, index);
  args.out = offset(grads.bias.data, chunk.begin, *pass.bwd.specs->grad_bias_dtype);
  args.addend = grads.accumulate ? args.out : nullptr;
  args.alpha = pass.inv_scale();
  args.n_rows = pass.call.n;
  args.dz_stride = pass.chunks.dz_stride;
  args.cols = static_cast<int>(chunk.cols);
  launch_linear_logp_bwd_bias(*pass.bwd.bias, args, stream);
}

void enqueue_chunk_grad_weight(const BackwardPass& pass, std::int64_t index, CUstream stream) {
  const BackwardCall& call = pass.call;
  const LinearLogpBwdKernels& k = *pass.bwd.specs;
  const BackwardChunk chunk = pass.chunks.chunk(index);
  kernels::GemmArgs w = chunk_gemm_args(pass, index);  // grad_weight[chunk] = dZ^T X over all rows, in one product
  w.b = call.in.hidden.data;
  w.b_stride = call.hidden_stride;
  w.b_rows = call.n;
  w.out = offset(call.grads.weight.data, chunk.begin * call.grad_weight_stride, k.grad_weight_dtype);
  w.out_stride = call.grad_weight_stride;
  w.addend = call.grads.accumulate ? w.out : nullptr;
  w.addend_stride = call.grad_weight_stride;
  w.m = chunk.cols;
  w.k = call.n;
  launch_gemm(*pass.bwd.grad_weight, w, k.grad_weight_kind, k.gemm_tile, pass.bwd.split, stream);
}

void enqueue_chunk_grad_hidden(const BackwardPass& pass, std::int64_t index, CUstream stream) {
  const BackwardCall& call = pass.call;
  LinearLogpBwdState& bwd = pass.bwd;
  const LinearLogpConfig& c = bwd.layout.config;
  const BackwardChunk chunk = pass.chunks.chunk(index);
  kernels::GemmArgs h = chunk_gemm_args(pass, index);  // grad_hidden (+)= dZ W[chunk]
  h.b = offset(call.in.weight.data, chunk.begin * call.weight_stride, c.dtype);
  h.b_stride = call.weight_stride;
  // Padding rows of W hold no data (possibly not even numbers): they read as zeros.
  h.b_rows = std::clamp<std::int64_t>(bwd.layout.valid_local - chunk.begin, 0, chunk.cols);
  h.m = call.n;
  h.k = chunk.cols;
  // Into the fp32 accumulator until the last chunk, which writes grad_hidden; an fp32 op
  // accumulates in grad_hidden itself. TP: always into the accumulator (BackwardPass::tp_reduce).
  const bool last = index + 1 == pass.chunks.chunks;
  const bool in_place = c.dtype == DType::kFP32 && !pass.tp_reduce;
  const bool direct = !pass.tp_reduce && (last || in_place);
  void* acc = in_place ? call.grads.hidden.data : bwd.accumulator.as<void>();
  const std::int64_t acc_stride = in_place ? call.grad_hidden_stride : c.hidden;
  h.out = direct ? call.grads.hidden.data : acc;
  h.out_stride = direct ? call.grad_hidden_stride : acc_stride;
  h.addend = index == pass.first_hidden_chunk() ? nullptr : acc;
  h.addend_stride = acc_stride;
  if (index == 1 && pass.kept_use.second) {
    enqueue_grad_hidden_in_bands(pass, h, acc_stride, stream);
  } else {
    launch_grad_hidden(pass, h, direct, stream);
  }
}

void enqueue_chunk(const BackwardPass& pass, std::int64_t index, unsigned parts, CUstream stream) {
  const BackwardCall& call = pass.call;
  if (parts & kChunkDz) enqueue_chunk_dz(pass, index, stream);
  if (call.grad_bias && (parts & kChunkBias)) enqueue_chunk_bias_sums(pass, index, stream);
  if (call.grad_weight && (parts & kChunkWeight)) enqueue_chunk_grad_weight(pass, index, stream);
  if (call.grad_hidden && call.n > 0 && (parts & kChunkHidden)) enqueue_chunk_grad_hidden(pass, index, stream);
}

void enqueue_all_chunks(const BackwardPass& pass, CUstream stream) {
  const std::int64_t first = pass.first_hidden_chunk();
  enqueue_chunk(pass, first, kChunkAll, stream);
  for (std::int64_t index = 0; index < pass.chunks.chunks; ++index) {
    if (index != first) enqueue_chunk(pass, index, kChunkAll, stream);
  }
}

void enqueue_round_grad_hidden(const BackwardPass& pass, CUstream stream) {
  const BackwardCall& call = pass.call;
  LinearLogpBwdState& bwd = pass.bwd;
  const LinearLogpBwdKernels& k = *bwd.specs;
  // The GEMM with k = 0 is a rounding copy: out = 0 + addend.
  kernels::GemmArgs r{};
  r.a = bwd.dz_buffer.as<void>();
  r.a_stride = pass.chunks.dz_stride;
  r.a_cols = 8;
  r.b = call.in.weight.data;
  r.b_stride = call.weight_stride;
  r.out = call.grads.hidden.data;
  r.out_stride = call.grad_hidden_stride;
  r.addend = bwd.accumulator.as<void>();
  r.addend_stride = bwd.layout.config.hidden;
  r.mask_stride = 1;
  r.mask_block_rows = k.dz_tile.bm;
  r.mask_block_cols = k.dz_tile.bn;
  r.m = call.n;
  r.n = bwd.layout.config.hidden;
  launch_gemm(*bwd.grad_hidden_out, r, k.grad_hidden_out_kind, k.gemm_tile, bwd.split, stream);
}

}  // namespace shardjit
