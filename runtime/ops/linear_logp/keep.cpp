// The kept-chunk decisions (keep.hpp): the op's, the forward call's, the backward call's.
#include "runtime/ops/linear_logp/keep.hpp"

#include <algorithm>

#include "linear_logp/fwd_layout.cuh"
#include "runtime/driver/stream.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/linear_logp/impl.hpp"

namespace shardjit {

bool op_keeps_chunks(const LinearLogpConfig& c, const FwdTile& dz_tile, DType dz_dtype, int tp) {
  return tp == 1 && dz_tile.wgmma && dtype_size(dz_dtype) == 2 && c.grad_filter_threshold == 0.0f;
}

std::int64_t keep_logits_budget(const LinearLogpConfig& c, std::int64_t accumulator_bytes) {
  if (c.keep_logits_bytes != kKeepLogitsAuto) return c.keep_logits_bytes;
  const std::int64_t room = kAutoKeepTotalBytes - backward_workspace_budget(c) - accumulator_bytes;
  return std::max(room, kAutoKeepFloorBytes);
}

BackwardBufferBudget backward_buffer_budget(const LinearLogpConfig& c, const BackwardBuffers& held,
                                            const BackwardChunks& chunks) {
  BackwardBufferBudget budget;
  const auto need_dz = static_cast<std::int64_t>(chunks.dz_bytes);
  const std::int64_t accumulator = std::max(held.accumulator, static_cast<std::int64_t>(chunks.accumulator_bytes));
  budget.keep_budget = keep_logits_budget(c, accumulator);
  budget.cap = saturating_budget_sum(backward_workspace_budget(c), budget.keep_budget);
  budget.release_dz = held.dz > std::max(need_dz, budget.cap);
  const std::int64_t dz = budget.release_dz ? need_dz : std::max(held.dz, need_dz);
  budget.keep_room = std::clamp<std::int64_t>(budget.cap - dz, 0, budget.keep_budget);
  budget.release_keep = held.keep > budget.keep_room;
  return budget;
}

std::size_t kept_chunk_bytes(const BackwardChunks& chunks, std::int64_t n_rows) {
  return static_cast<std::size_t>(std::max<std::int64_t>(n_rows, 0)) * static_cast<std::size_t>(chunks.dz_stride) * 2;
}

int chunks_kept_in_place(const BackwardChunks& chunks) { return chunks.kept_band_rows > 0 ? 2 : 1; }

int kept_chunks_budget(const BackwardChunks& chunks, std::int64_t n_rows, std::int64_t keep_bytes) {
  const std::size_t chunk = kept_chunk_bytes(chunks, n_rows);
  const int in_place = chunks_kept_in_place(chunks);
  if (chunk == 0 || keep_bytes <= 0) return in_place;
  // No more further chunks than the call has chunks: the count stays an int.
  const std::size_t further = std::min(static_cast<std::size_t>(keep_bytes) / chunk,
                                       static_cast<std::size_t>(std::max<std::int64_t>(chunks.chunks, 0)));
  return in_place + static_cast<int>(further);
}

std::int64_t keep_buffer_bytes_at_build(const BackwardChunks& most, std::int64_t chunk_budget,
                                        std::int64_t keep_bytes) {
  const std::int64_t further = std::max<std::int64_t>(most.chunks - 1 - chunks_kept_in_place(most), 0);
  return std::clamp<std::int64_t>(further * chunk_budget, 0, std::max<std::int64_t>(keep_bytes, 0));
}

int keepable_chunks(const BackwardChunks& chunks, std::int64_t valid_local, int fwd_tile_cols, int most) {
  const std::int64_t cols = chunks.chunk_cols;
  if (most >= 1 && chunks.chunks == 1) return 1;
  if (most < 1 || chunks.chunks < 2 || cols % fwd_tile_cols != 0 || cols >= valid_local) return 0;
  if (most < 2 || 2 * cols >= valid_local) return 1;
  // k chunks end before the valid columns do where k x cols < valid_local.
  return static_cast<int>(std::min<std::int64_t>(most, (valid_local - 1) / cols));
}

bool forward_keeps_whole_chunk(const BackwardChunks& chunks, int kept_chunks, const VocabSplit& split) {
  return kept_chunks == 1 && chunks.chunks == 1 && split.rows_as_n && split.tile_cols == kernels::kKeptColumnTileCols;
}

KeptChunksUse usable_kept_chunks(const KeptChunk& kept, const BackwardChunks& chunks, const BackwardKeptMatch& call) {
  KeptChunksUse use;
  use.first = call.n > 0 && !call.dz_buffer_grew && kept.capture == call.capture && kept.hidden == call.hidden &&
              kept.weight == call.weight && kept.bias == call.bias && kept.lse == call.lse && kept.n == call.n &&
              kept.hidden_stride == call.hidden_stride && kept.weight_stride == call.weight_stride &&
              kept.cols == chunks.chunk(0).cols && kept.dz == call.dz_buffer;
  use.second = use.first && kept.second != nullptr && !call.accumulator_grew && kept.accumulator == call.accumulator &&
               chunks.chunks >= 3 && chunks.chunk(1).cols == kept.cols &&
               (!call.grad_hidden || chunks.kept_band_rows > 0);
  const int further = kept.further_chunks;
  use.further_begin = kept.further_begin;
  const std::int64_t end = kept.further_begin + further;  // the first chunk past them
  if (use.first && further > 0 && !call.keep_buffer_released && kept.keep_buffer == call.keep_buffer &&
      chunks.chunks > end && chunks.chunk(end - 1).cols == kept.cols) {
    use.further = further;
  }
  return use;
}

ForwardLaunch LinearLogp::Impl::forward_launch(std::int64_t n_rows, int most_kept) const {
  ForwardLaunch launch;
  // Rows the backward refuses (not one column of dZ tiles fits its budget) keep nothing.
  if (most_kept > 0 && bwd.keep && !tp && bwd.fits(n_rows)) {
    launch.chunks = bwd.chunks_for(n_rows, true);
    const int most = std::min(most_kept, kept_chunks_budget(launch.chunks, n_rows, bwd.keep_room(launch.chunks)));
    launch.kept_chunks = keepable_chunks(launch.chunks, layout.valid_local, tile.bn, most);
  }
  if (launch.kept_chunks == 0) {
    launch.chunks = BackwardChunks{};
    launch.split = vocab_split(n_rows);
    return launch;
  }
  const int in_place = std::min(launch.kept_chunks, chunks_kept_in_place(launch.chunks));
  launch.writes_accumulator = in_place >= 2;
  launch.keep_buffer_bytes =
      static_cast<std::size_t>(launch.kept_chunks - in_place) * kept_chunk_bytes(launch.chunks, n_rows);
  launch.kept_cols = launch.kept_chunks * launch.chunks.chunk_cols;
  launch.kept_tiles = static_cast<int>(launch.kept_cols / bwd.specs->dz_tile.bn);
  launch.forward_kernel = launch.kept_cols < layout.valid_local;
  if (launch.forward_kernel) {
    launch.split = vocab_split(n_rows, launch.kept_cols);
  } else if (bwd.kept_dz_columns) {
    // Planned among keeping_plan_tiles: a plan of the rows as N is then one a keeping kernel runs
    // (fwd_tile_keeps: not the 256-column tiles, nor 168 rows with entropy).
    const VocabSplit whole = vocab_split(n_rows, 0, true);
    if (forward_keeps_whole_chunk(launch.chunks, launch.kept_chunks, whole) && find_fwd(whole, true)) {
      launch.split = whole;
      launch.forward_kernel = true;
      launch.forward_keeps = true;
      launch.kept_tiles = 0;
      // The backward reads a max for each of the chunk's columns, up to its dZ rows' end.
      launch.kept_max_tiles = static_cast<int>((launch.chunks.dz_stride + kernels::kKeptColumnTileCols - 1) /
                                               kernels::kKeptColumnTileCols);
    }
  }
  // Sources past what the combine merges keep one chunk fewer.
  if (launch.sources() > kMaxCombineSources) return forward_launch(n_rows, launch.kept_chunks - 1);
  return launch;
}

ForwardLaunch LinearLogp::Impl::decide_forward_launch(const ForwardCall& call, CUstream stream) const {
  // Only a call that writes lse keeps: its backward passes that lse back, which names the forward.
  ForwardLaunch launch = forward_launch(call.n, call.has_lse ? kAnyKeptChunks : 0);
  if (launch.kept_chunks == 0) return launch;
  const std::uint64_t capture = stream_capture_id(stream);
  // Kept chunks never grow what max_rows sized at build, nor anything during graph capture: where
  // they would have to, the forward keeps fewer (those past the second need the keep buffer, the
  // second the accumulator, the first only the dZ buffer), or none.
  if (layout.config.max_rows > 0 || capture != 0) {
    auto fits = [&](const ForwardLaunch& l) {
      const bool partials_fit =
          static_cast<std::size_t>(call.n * l.partial_slots()) * sizeof(kernels::RowPartial) <= workspace.bytes();
      return partials_fit && l.keep_buffer_bytes <= bwd.keep_buffer.bytes() &&
             (capture == 0 || bwd.holds(l.chunks, call.n, l.writes_accumulator));
    };
    while (launch.kept_chunks > 0 && !fits(launch)) launch = forward_launch(call.n, launch.kept_chunks - 1);
  }
  launch.capture = capture;
  return launch;
}

}  // namespace shardjit
