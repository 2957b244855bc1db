// Arguments of the fused forward kernels (templates/linear_logp/fwd.cuh, fwd_hopper.cuh). Shared
// verbatim by the host and the kernels, so only built-in types appear here.
#pragma once

#include "common/tma_descriptor.cuh"
#include "linear_logp/combine_args.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// Grid: whole_units + (row_tiles x splits - whole_units) x unit_pieces blocks in x; each takes its
// unit from its launch position (fwd_block_order.cuh). The units go in groups of group_rows row
// tiles, row tile fastest (common/tile_order.cuh), so that the blocks running at the same time
// share few row tiles of X, which then stay in L2 across vocabulary tiles, and the blocks that
// start at about the same time, in the first wave or as earlier ones finish, are row tiles of
// one split, which read the same W tiles together.
struct LinearLogpFwdArgs {
  const void* hidden;       // X [n_rows, H], row stride hidden_stride elements
  const void* weight;       // W [V_LOCAL, H], row stride weight_stride elements
  const void* bias;         // b [V_LOCAL] of the kernel's bias type; unused with NoBias
  const void* targets;      // t [n_rows], global ids of the kernel's target type
  RowPartial* partials;     // [splits x unit_pieces][n_rows]: one slice per partial source
  long long n_rows;
  long long hidden_stride;
  long long weight_stride;
  long long vocab_start;    // global id of W's row 0
  int row_tiles;            // ceil(n_rows / BM)
  int splits;               // vocabulary splits
  int group_rows;           // row tiles of a group: those a wave of blocks holds, ceil(SMs / splits)
  int whole_units;          // units that run whole, one block each; the rest are cut into pieces
  int unit_pieces;          // pieces of a cut unit, and partial sources of a split (>= 1)
  int first_tile;           // the splits cover the shard's vocabulary tiles from this one on; the
                            // ones before it are another kernel's (the kept chunk's, fwd_keep.cuh)
  int hidden_size;          // H, and
  int valid_local;          // V_VALID, the shard's columns with logits: the Hopper kernel
                            // (fwd_hopper.cuh) takes the shape from here, the portable one
                            // (fwd.cuh) has both compiled in
  float inv_temperature;
  // The Hopper kernel only (fwd_hopper.cuh):
  unsigned int* arrivals;   // null, or a counter a row tile, zero between calls: the kernel then
                            // merges each row tile's partials itself (fwd_merge.cuh), with
  LogpCombineArgs combine;  // the combine kernel's arguments for the call's sources
  // The tiles of the rows as N built with KEEP only (fwd_column_keep.cuh): the backward's one
  // chunk, kept whole by this kernel:
  void* kept;                 // fp16 [n_rows][kept_stride]: z - m of the columns below kept_cols
  RowPartial* kept_tile_max;  // [128-column tile][n_rows]: m in the max (nothing else written)
  long long kept_stride;
  int kept_cols;
};

// The kernels' parameter: the arguments and, for the Hopper kernel, the TMA maps of X [n_rows][H]
// (in boxes of BM rows, and of x_tail_box_rows for a shorter last row tile:
// common/row_tile_box.cuh) and of W's valid rows [V_VALID][H], encoded by the host for each launch
// (runtime/ops/tensor_maps.cpp); unused (zeros) on the portable loops.
struct LinearLogpFwdParams {
  LinearLogpFwdArgs args;
  TmaDescriptor x_map;
  TmaDescriptor x_tail_map;
  TmaDescriptor w_map;
  int x_tail_box_rows;
};

}  // namespace kernels
}  // namespace shardjit
