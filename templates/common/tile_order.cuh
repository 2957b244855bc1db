// The order in which a 2-D grid of independent output tiles is walked, for L2 reuse.
//
// Blocks are launched x fastest. Taken in plain order with row tiles in x, a wave of 132 blocks is
// 132 row tiles of one output column: each streams its own A rows from memory while all share
// one B column, and the next wave streams every A row again. In groups of GROUP_ROWS row tiles
// walked column by column, a wave covers a few rows across many columns: each A and B slice is
// read by several blocks at about the same time, and the group's A rows are read again by its
// next wave while still in L2 (docs/perf-notes.md, "Tile order").
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Row tiles a group of the grouped order holds, for the backward's 128 x 256 tiles on a GPU of
// ~132 multiprocessors. A wave of W tiles in groups of g rows reads g row strips (A) and W / g
// column strips (B) whole along K, and a B strip is twice an A strip (256 columns against 128
// rows), so the wave reads g + 2W / g A strips' bytes from memory: least at g = sqrt(2W) ~ 16
// (docs/perf-notes.md, "Tile order").
constexpr int kTileGroupRows = 16;

struct TileIndex {
  int m;  // row tile
  int n;  // column tile
};

// The tile of the block launched id-th (x fastest) of tiles_m x tiles_n, in groups of
// group_rows row tiles. Plain C++ too, so that the host tests can check it covers every tile once.
SHARDJIT_HOST_DEVICE inline TileIndex grouped_tile_index(int id, int tiles_m, int tiles_n, int group_rows) {
  const int per_group = group_rows * tiles_n;
  const int first_m = (id / per_group) * group_rows;
  const int rows = min_int(tiles_m - first_m, group_rows);
  const int in_group = id % per_group;
  return TileIndex{first_m + in_group % rows, in_group / rows};
}

// The tile of position `id` of a split plan's sequence (templates/common/stream_k.cuh), row
// after row: the row tiles of a column lie tiles_n apart.
SHARDJIT_HOST_DEVICE inline TileIndex row_major_tile_index(int id, int tiles_n) {
  return TileIndex{id / tiles_n, id % tiles_n};
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// The block's launch position in a 2-D grid.
__device__ __forceinline__ int linear_block_index() {
  return static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x);
}
#endif

}  // namespace kernels
}  // namespace shardjit
