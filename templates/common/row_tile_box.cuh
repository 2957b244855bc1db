// The TMA box of a row tile of a row-major operand: X in the kernels that compute logit tiles on
// the Hopper loop (linear_logp/fwd_hopper.cuh, linear_logp/logit_tiles_hopper.cuh), A [m][k] in
// the GEMM's (gemm/gemm_tma.cuh).
//
// Their parameters hold two maps of the operand: one in boxes of the tile's BM rows, for whole
// row tiles, and a tail map in boxes of the last row tile's rows rounded up to 8, for a last tile
// of fewer rows: a call of fewer rows than the tile, or 150 rows' second 128-row tile of 22. A box
// mostly past the operand's rows ran the forward ~30 % slower (docs/perf-notes.md, "Calls of fewer
// rows than a tile"). The host encodes both (runtime/ops/tensor_maps.cpp, tail_box_rows).
//
// The stage's rows past a short box keep stale shared memory. wgmma keeps accumulator rows apart
// (a product's row depends on its own row of the operand alone), so they reach only rows past the
// operand's, which the kernels never store.
#pragma once

#include "common/tma_descriptor.cuh"

namespace shardjit {
namespace kernels {

struct RowTileBox {
  const TmaDescriptor* map;
  int rows;  // the box's rows: a stage's part for the operand receives rows x 128 bytes
};

// The box of the row tile whose first row has rows_left rows of the operand from it on (the tile's
// rows, or any count from BM up: a whole tile).
template <int BM>
__device__ __forceinline__ RowTileBox row_tile_box(const TmaDescriptor& whole_map, const TmaDescriptor& tail_map,
                                                   int tail_box_rows, long long rows_left) {
  if (rows_left < BM) return RowTileBox{&tail_map, tail_box_rows};
  return RowTileBox{&whole_map, BM};
}

}  // namespace kernels
}  // namespace shardjit
