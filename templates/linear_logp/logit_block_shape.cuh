// The compile-time limits of a kernel that recomputes a BM x BN block of logits of a shard
// (the forward, the dZ kernels, the kept chunk's forward): checked once here, instantiated by each.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Columns of a BM x BN tile that the main loop hands to the epilogue at a time, through the
// shared-memory logit tile: the whole tile up to 128 columns and 16384 floats, else a chunk of
// that many. A 128 x 256 tile thus goes in two 128-column chunks through a 68 KiB logit tile
// instead of one of 132 KiB, which leaves the shared memory for the pipeline.
SHARDJIT_HOST_DEVICE constexpr int logit_chunk_cols(int bm, int bn) {
  const int cols = bn < 128 ? bn : 128;
  return bm * cols <= 16384 ? cols : 16384 / bm;
}

// The tile alone: what the kernels that take the shard at run time check (the Hopper loop's
// forward, dZ kernel and kept-chunk forward, whose main loops count their K slices at run time
// and whose TMA maps carry H and the valid rows).
template <int BM, int BN, int BK, int STAGES>
struct LogitTileShape {
  static_assert(BM == 64 || BM == 128 || BM == 256, "BM is 64, 128 or 256");
  // 192: one of the Hopper forward's tiles (fwd_hopper.cuh), which folds in registers.
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN is 64, 128, 192 or 256");
  static_assert(BM * BN <= 32768, "a tile holds at most 32768 accumulators (registers)");
  static_assert(BK == 32 || BK == 64, "BK is 32 or 64");
  static_assert(STAGES >= 2 && STAGES <= 4, "STAGES is 2, 3 or 4");
  static constexpr bool valid = true;
};

// The tile and the shard, for the kernels specialized for both.
template <int H, int V_LOCAL, int V_VALID, int BM, int BN, int BK, int STAGES>
struct LogitBlockShape {
  static_assert(LogitTileShape<BM, BN, BK, STAGES>::valid, "the tile is checked there");
  static_assert(H >= 8 && H % 8 == 0, "H is a positive multiple of 8");
  static_assert(V_VALID >= 0 && V_VALID <= V_LOCAL, "V_VALID is in [0, V_LOCAL]: a TP shard may be all padding");
  static constexpr bool valid = true;
};

}  // namespace kernels
}  // namespace shardjit
