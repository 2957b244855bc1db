// What a block of the forward (linear_logp_fwd, linear_logp_fwd_hopper) works on and writes: its
// unit or piece (fwd_block_order.cuh) with the rows and vocabulary tiles that follow from it,
// and, when its tiles are done, its rows' partials to the source of its unit or piece and, for a
// whole unit, empty partials to its split's other sources, which only cut units' pieces fill.
#pragma once

#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block_order.cuh"
#include "linear_logp/partial_merge.cuh"

namespace shardjit {
namespace kernels {

struct FwdBlock {
  FwdBlockWork work;
  long long row0;   // X row of the row tile's row 0
  int rows;         // rows of the row tile that exist
  TileRange tiles;  // this shard's vocabulary tiles of the unit or piece
};

// The block's share, from its launch position, for BM-row tiles over vocabulary tiles
// [args.first_tile, vocab_tiles) (a constant on the portable loops, the shard's at run time on
// the Hopper loop).
template <int BM>
__device__ __forceinline__ FwdBlock fwd_block(const LinearLogpFwdArgs& args, int vocab_tiles) {
  FwdBlock block;
  block.work =
      fwd_block_work(static_cast<int>(blockIdx.x), args.row_tiles, args.splits, args.group_rows, args.whole_units);
  block.row0 = static_cast<long long>(block.work.row_tile) * BM;
  const long long rows_left = args.n_rows - block.row0;
  block.rows = rows_left < BM ? static_cast<int>(rows_left) : BM;
  // A TP rank's splits are counted over the widest shard's, and a narrower shard's last splits
  // come out shorter or empty.
  block.tiles = fwd_block_tiles(block.work, args.splits, args.unit_pieces, vocab_tiles - args.first_tile);
  block.tiles.begin += args.first_tile;
  block.tiles.end += args.first_tile;
  return block;
}

// `epilogue.store(out, row0, n_rows, tid)` writes the block's rows; `threads` threads call this,
// tid from 0.
template <class Epilogue>
__device__ __forceinline__ void store_block_partials(const Epilogue& epilogue, const LinearLogpFwdArgs& args,
                                                     const FwdBlock& block, int bm, int tid, int threads) {
  const int first_source = block.work.split * args.unit_pieces;
  const int piece = block.work.piece < 0 ? 0 : block.work.piece;
  epilogue.store(args.partials + static_cast<long long>(first_source + piece) * args.n_rows, block.row0, args.n_rows,
                 tid);
  if (block.work.piece < 0) {
    for (int c = 1; c < args.unit_pieces; ++c) {
      store_empty_partials(args.partials + static_cast<long long>(first_source + c) * args.n_rows, block.row0,
                           args.n_rows, bm, tid, threads);
    }
  }
}

}  // namespace kernels
}  // namespace shardjit
