// Which (row tile, vocabulary tiles) each block of linear_logp_fwd works on, and where it writes
// the partials. Shared verbatim by the host (plain C++: the plan, the tests) and the kernel.
//
// The work is R row tiles x S vocabulary splits: a unit (row tile, split s) is the split's tiles
// [s P, min((s + 1) P, V)) for one row tile, P = ceil(V / S), taken in the grouped launch order
// (common/tile_order.cuh). Run one block a unit, the units fill whole waves of one block a
// multiprocessor and then a last, partial wave: at 16k rows x 8 splits on 132 multiprocessors,
// 1024 units are 7 waves and 100 units, and 32 multiprocessors idle through the last wave.
//
// So the units of the last wave (tail units) may be cut. The block of a tail unit takes its first
// `tail_lead` tiles; the rest of the unit is cut into `tail_parts` parts of `tail_part_tiles`
// tiles, which `part_blocks` more blocks (the multiprocessors the last wave left idle) share
// round robin. Blocks that start together then read the same W tiles (every lead starts at its
// split's first tile; the parts are taken unit fastest, so consecutive part blocks read the same
// tiles of one split for different row tiles), and the last wave ends about when a whole wave's
// share of the tail's tiles is done.
//
// Every piece a block works on (a row tile and a range of its split's tiles, possibly empty)
// writes one partial source, sources_per_split() of them a split: source s K + 0 holds the
// unit's whole split or its lead; s K + 1 + c its part c. A block of a unit that is not cut also
// writes its unit's part sources, as empty partials, so that every source of every row is
// written exactly once by one block.
#pragma once

#include "common/host_device.cuh"
#include "common/tile_order.cuh"

namespace shardjit {
namespace kernels {

struct FwdSchedule {
  int row_tiles = 1;        // R
  int splits = 1;           // S
  int group_rows = 1;       // row tiles of a group of the launch order (LinearLogpFwdArgs)
  int vocab_tiles = 1;      // V: the shard's BN-column tiles (linear_logp_fwd counts its own)
  int whole_units = 1;      // units [0, whole_units) run whole, one block each; the rest are cut
  int tail_lead = 0;        // tiles of a cut unit that its own block takes
  int tail_parts = 0;       // parts the rest of a cut unit is cut into (0: no unit is cut)
  int tail_part_tiles = 0;  // tiles of a part (the unit's last part may have fewer, or none)
  int part_blocks = 0;      // blocks sharing the parts, after the units' blocks

  SHARDJIT_HOST_DEVICE int units() const { return row_tiles * splits; }
  SHARDJIT_HOST_DEVICE int cut_units() const { return units() - whole_units; }
  SHARDJIT_HOST_DEVICE int sources_per_split() const { return 1 + tail_parts; }
  SHARDJIT_HOST_DEVICE int sources() const { return splits * sources_per_split(); }
  SHARDJIT_HOST_DEVICE int blocks() const { return units() + (tail_parts > 0 ? part_blocks : 0); }
  SHARDJIT_HOST_DEVICE int split_tiles() const { return (vocab_tiles + splits - 1) / splits; }
};

struct FwdPiece {
  int row_tile;
  int tile_begin;  // vocabulary tiles [tile_begin, tile_end) of the shard; may be empty
  int tile_end;
  int source;      // the partial source it writes (the partials' slice)
};

// How many pieces block `block` (its launch position) works on, in order.
SHARDJIT_HOST_DEVICE inline int fwd_block_pieces(const FwdSchedule& s, int block) {
  if (block < s.whole_units) return s.sources_per_split();
  if (block < s.units()) return 1;
  const int parts = s.cut_units() * s.tail_parts;
  const int m = block - s.units();
  return m < parts ? (parts - m + s.part_blocks - 1) / s.part_blocks : 0;
}

// Piece i < fwd_block_pieces(s, block) of block `block`.
SHARDJIT_HOST_DEVICE inline FwdPiece fwd_block_piece(const FwdSchedule& s, int block, int i) {
  int unit = block;
  int part = i;  // 0: the lead (or the whole unit); c + 1: part c
  if (block >= s.units()) {
    const int p = block - s.units() + i * s.part_blocks;
    unit = s.whole_units + p % s.cut_units();
    part = 1 + p / s.cut_units();
  }
  const TileIndex t = grouped_tile_index(unit, s.row_tiles, s.splits, s.group_rows);
  const int per = s.split_tiles();
  const int first = t.n * per < s.vocab_tiles ? t.n * per : s.vocab_tiles;
  const int end = first + per < s.vocab_tiles ? first + per : s.vocab_tiles;
  const auto clamp = [end](int tile) { return tile < end ? tile : end; };
  FwdPiece piece{t.m, first, end, t.n * s.sources_per_split() + part};
  if (unit < s.whole_units) {
    if (part > 0) piece.tile_begin = end;  // the part sources of a whole unit: empty
  } else if (part == 0) {
    piece.tile_end = clamp(first + s.tail_lead);
  } else {
    piece.tile_begin = clamp(first + s.tail_lead + (part - 1) * s.tail_part_tiles);
    piece.tile_end = clamp(piece.tile_begin + s.tail_part_tiles);
  }
  return piece;
}

}  // namespace kernels
}  // namespace shardjit
