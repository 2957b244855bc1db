// Which unit of work each block of the forward (either kernel) takes, from its launch position. Shared
// verbatim by the host (plain C++: the plan, the tests) and the kernel.
//
// The work is row_tiles x splits units, a unit being one row tile and one vocabulary split's
// tiles, taken in the grouped launch order (common/tile_order.cuh). Blocks run one a
// multiprocessor, so the units fill waves; but they do not stay in waves: a short split's blocks
// end early and their multiprocessors start the next units early, so by the last wave its blocks
// start over a window of up to half a unit, and multiprocessors idle until the last one ends
// (~4 % of the forward at 16k rows: docs/perf-notes.md, "Splits and block order").
//
// So the units from whole_units on are each cut into unit_pieces pieces of consecutive tiles,
// one block each, launched after the whole units, piece-major and unit-minor: the hardware hands
// these short blocks to multiprocessors as they free up, so the last ones end within about a
// piece of each other, and blocks that start together take the same tiles of one split for
// different row tiles, as the whole units do. Each piece writes its own partial source: a split
// has unit_pieces sources, piece c of a unit writes source split * unit_pieces + c, and the block
// of a whole unit writes source split * unit_pieces and empty partials in the split's others.
#pragma once

#include "common/host_device.cuh"
#include "common/tile_order.cuh"

namespace shardjit {
namespace kernels {

struct FwdBlockWork {
  int row_tile;
  int split;
  int piece;  // -1: the whole unit
};

// The work of the block launched block-th; with whole_units = row_tiles x splits every unit is
// whole.
SHARDJIT_HOST_DEVICE inline FwdBlockWork fwd_block_work(int block, int row_tiles, int splits, int group_rows,
                                                       int whole_units) {
  int unit = block;
  int piece = -1;
  if (block >= whole_units) {
    const int cut_units = row_tiles * splits - whole_units;
    unit = whole_units + (block - whole_units) % cut_units;
    piece = (block - whole_units) / cut_units;
  }
  const TileIndex t = grouped_tile_index(unit, row_tiles, splits, group_rows);
  return FwdBlockWork{t.m, t.n, piece};
}

// Tiles of every split but the last (which may have fewer, or none) when splits splits share
// vocab_tiles tiles: the split length of the kernel and of the host's plan (SplitPlan).
SHARDJIT_HOST_DEVICE constexpr int fwd_split_tiles(int vocab_tiles, int splits) {
  return (vocab_tiles + splits - 1) / splits;
}

// Tiles of a piece of a unit whose split has split_tiles tiles; the last pieces may have fewer,
// or none.
SHARDJIT_HOST_DEVICE constexpr int fwd_piece_tiles(int split_tiles, int unit_pieces) {
  return (split_tiles + unit_pieces - 1) / unit_pieces;
}

struct TileRange {
  int begin;  // vocabulary tiles [begin, end) of the shard; may be empty
  int end;
};

// The tiles of `work` over a shard of vocab_tiles tiles: split s covers [s P, min((s + 1) P,
// vocab_tiles)) with P = fwd_split_tiles(vocab_tiles, splits), and piece c of it the c-th
// fwd_piece_tiles(P, unit_pieces) tiles of that range.
SHARDJIT_HOST_DEVICE inline TileRange fwd_block_tiles(const FwdBlockWork& work, int splits, int unit_pieces,
                                                     int vocab_tiles) {
  const int per_split = fwd_split_tiles(vocab_tiles, splits);
  const int split_end = min_int(vocab_tiles, (work.split + 1) * per_split);
  int begin = min_int(vocab_tiles, work.split * per_split);
  int end = split_end;
  if (work.piece >= 0) {
    const int piece_tiles = fwd_piece_tiles(per_split, unit_pieces);
    begin = min_int(split_end, begin + work.piece * piece_tiles);
    end = min_int(split_end, begin + piece_tiles);
  }
  return TileRange{begin, end};
}

}  // namespace kernels
}  // namespace shardjit
