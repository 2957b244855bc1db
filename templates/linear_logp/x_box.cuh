// X's TMA box for a row tile, shared by the kernels that compute logit tiles on the Hopper loop:
// the forward (fwd_hopper.cuh) and the dZ and kept-chunk kernels (logit_tiles_hopper.cuh).
//
// Their parameters hold two maps of X [n_rows][H]: x_map, in boxes of the tile's BM rows, for
// whole row tiles, and x_tail_map, in boxes of x_tail_box_rows (the last row tile's rows rounded
// up to 8), for a last tile of fewer rows: a call of fewer rows than the tile, or 150 rows' second
// tile of 22. A box mostly past X's rows ran the forward ~30 % slower (docs/perf-notes.md, "Calls
// of fewer rows than a tile"). The host encodes both (runtime/ops/tensor_maps.cpp, tail_box_rows).
// The stage's rows past a short box keep stale shared memory, which reaches only accumulator rows
// past n_rows: a product's row depends on its own row of X alone.
#pragma once

#include "common/tma_descriptor.cuh"

namespace shardjit {
namespace kernels {

struct XBox {
  const TmaDescriptor* map;
  int rows;  // the box's rows: a stage's X part receives rows x BK elements
};

// The box of a row tile of tile_rows rows (at most BM); Params names x_map, x_tail_map and
// x_tail_box_rows.
template <int BM, class Params>
__device__ __forceinline__ XBox x_box(const Params& params, int tile_rows) {
  if (tile_rows < BM) return XBox{&params.x_tail_map, params.x_tail_box_rows};
  return XBox{&params.x_map, BM};
}

}  // namespace kernels
}  // namespace shardjit
