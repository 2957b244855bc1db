// Where one tile of the dZ kernels (templates/linear_logp/bwd_dz.cuh, logit_tiles_hopper.cuh)
// lies: its rows of X, its columns of the chunk and of the shard, its dZ and its mask byte. The
// tiles form a grid of ceil(n_rows / BM) row tiles by ceil(chunk_cols / BN) column tiles, walked
// in grouped order.
#pragma once

#include "common/tile_order.cuh"
#include "linear_logp/bwd_dz_args.cuh"

namespace shardjit {
namespace kernels {

template <class DZ, int BM, int BN, bool FILTER>
struct DzTile {
  long long row0;       // X row of the tile's row 0
  int rows;             // rows of the tile that exist
  int c0;               // chunk column of the tile's column 0
  int n0;               // shard column of the same
  DZ* out;              // dZ of (row0, c0)
  unsigned char* mask;  // FILTER: the tile's byte of tile_mask

  // Tile `index` of the grouped order over row_tiles x col_tiles tiles.
  __device__ __forceinline__ DzTile(const LinearLogpBwdDzArgs& args, int index, int row_tiles, int col_tiles) {
    const TileIndex tile = grouped_tile_index(index, row_tiles, col_tiles, kTileGroupRows);
    row0 = static_cast<long long>(tile.m) * BM;
    const long long rows_left = args.n_rows - row0;
    rows = rows_left < BM ? static_cast<int>(rows_left) : BM;
    c0 = tile.n * BN;
    n0 = args.chunk_begin + c0;
    out = static_cast<DZ*>(args.dz) + row0 * args.dz_stride + c0;
    // The mask is [row tile][column tile], whatever order the tiles are walked in.
    mask = FILTER ? args.tile_mask + static_cast<long long>(tile.m) * col_tiles + tile.n : nullptr;
  }
};

}  // namespace kernels
}  // namespace shardjit
