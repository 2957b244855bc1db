// The order in which a 2-D grid of independent output tiles is walked, for L2 reuse.
//
// Blocks are launched x fastest. Taken in plain order with row tiles in x, a wave of 132 blocks is
// 132 row tiles of one output column: each streams its own A rows from memory while all share
// one B column, and the next wave streams every A row again. In groups of GROUP_ROWS row tiles
// walked column by column, a wave covers a few rows across many columns: each A and B slice is
// read by several blocks at about the same time, and the group's A rows are read again by its
// next wave while still in L2 (docs/perf-notes.md, "Grouped GEMM tile order").
#pragma once

namespace shardjit {
namespace kernels {

struct TileIndex {
  int m;  // row tile
  int n;  // column tile
};

// The tile of block (bx, by) of a grid of tiles_m x tiles_n blocks.
template <int GROUP_ROWS>
__device__ __forceinline__ TileIndex grouped_tile_index(int bx, int by, int tiles_m, int tiles_n) {
  const int id = by * tiles_m + bx;
  const int per_group = GROUP_ROWS * tiles_n;
  const int first_m = (id / per_group) * GROUP_ROWS;
  const int rows = min(tiles_m - first_m, GROUP_ROWS);
  const int in_group = id % per_group;
  return TileIndex{first_m + in_group % rows, in_group / rows};
}

}  // namespace kernels
}  // namespace shardjit
