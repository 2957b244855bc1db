// The kept-chunk decisions (keep.hpp): the op's, the forward call's, the backward call's.
#include "runtime/ops/linear_logp/keep.hpp"

#include "runtime/driver/stream.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/linear_logp/impl.hpp"

namespace shardjit {

bool op_keeps_chunks(const LinearLogpConfig& c, const FwdTile& dz_tile, DType dz_dtype, int tp) {
  return tp == 1 && dz_tile.wgmma && dtype_size(dz_dtype) == 2 && c.grad_filter_threshold == 0.0f;
}

int keepable_chunks(const BackwardChunks& chunks, std::int64_t valid_local, int fwd_tile_cols, int most) {
  const std::int64_t cols = chunks.chunk_cols;
  if (most < 1 || chunks.chunks < 2 || cols % fwd_tile_cols != 0 || cols >= valid_local) return 0;
  return most >= 2 && chunks.kept_band_rows > 0 && 2 * cols < valid_local ? 2 : 1;
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
  return use;
}

ForwardLaunch LinearLogp::Impl::forward_launch(std::int64_t n_rows, int most_kept) const {
  ForwardLaunch launch;
  // Rows the backward refuses (not one column of dZ tiles fits its budget) keep nothing.
  if (most_kept > 0 && bwd.keep && !tp && bwd.fits(n_rows)) {
    launch.chunks = bwd.chunks_for(n_rows, true);
    launch.kept_chunks = keepable_chunks(launch.chunks, layout.valid_local, tile.bn, most_kept);
  }
  if (launch.kept_chunks == 0) {
    launch.chunks = BackwardChunks{};
    launch.split = vocab_split(n_rows);
    return launch;
  }
  if (launch.kept_chunks < 2) launch.chunks.accumulator_bytes = 0;  // the forward writes nothing there
  launch.kept_cols = launch.kept_chunks * launch.chunks.chunk_cols;
  launch.kept_tiles = static_cast<int>(launch.kept_cols / bwd.specs->dz_tile.bn);
  launch.split = vocab_split(n_rows, launch.kept_cols);
  // Sources past what the combine merges keep one chunk fewer.
  if (launch.sources() > kMaxCombineSources) return forward_launch(n_rows, launch.kept_chunks - 1);
  return launch;
}

ForwardLaunch LinearLogp::Impl::decide_forward_launch(const ForwardCall& call, CUstream stream) const {
  // Only a call that writes lse keeps: its backward passes that lse back, which names the forward.
  ForwardLaunch launch = forward_launch(call.n, call.has_lse ? kMaxKeptChunks : 0);
  if (launch.kept_chunks == 0) return launch;
  const std::uint64_t capture = stream_capture_id(stream);
  // Kept chunks never grow what max_rows sized at build, nor anything during graph capture: where
  // they would have to, the forward keeps fewer (the second needs the accumulator, the first only
  // the dZ buffer), or none.
  if (layout.config.max_rows > 0 || capture != 0) {
    auto fits = [&](const ForwardLaunch& l) {
      const bool partials_fit =
          static_cast<std::size_t>(call.n * l.sources()) * sizeof(kernels::RowPartial) <= workspace.bytes();
      return partials_fit && (capture == 0 || bwd.holds(l.chunks, call.n));
    };
    while (launch.kept_chunks > 0 && !fits(launch)) launch = forward_launch(call.n, launch.kept_chunks - 1);
  }
  launch.capture = capture;
  return launch;
}

}  // namespace shardjit
