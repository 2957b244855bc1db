// Arguments of the backward dZ kernels (templates/linear_logp/bwd_dz.cuh, bwd_dz_hopper.cuh), and
// of the two kernels of a kept chunk, which the forward writes as logits and the backward turns into dZ
// (fwd_keep.cuh, bwd_kept_dz.cuh). Shared verbatim by the host and the kernels, so only built-in
// types appear here.
#pragma once

#include "common/stream_k.cuh"
#include "common/tma_descriptor.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

struct LinearLogpBwdDzArgs {
  const void* hidden;        // X [n_rows, H], row stride hidden_stride elements
  const void* weight;        // W [V_LOCAL, H], row stride weight_stride elements
  const void* bias;          // b [V_LOCAL] of the kernel's bias type; unused with NoBias
  const void* targets;       // t [n_rows], global ids of the kernel's target type
  const float* lse;          // [n_rows], the forward's log-sum-exp over the global vocabulary
  const float* grad_logp;    // g [n_rows]; null: 0
  const float* grad_lse;     // h [n_rows]; null: 0
  // e [n_rows], the gradient of the entropy; null: 0. With it, H [n_rows], the forward's entropy
  // over the global vocabulary (never null then).
  const float* grad_entropy;
  const float* entropy;
  const float* scale;        // device scalar s: dZ is stored times s (a power of two); null: 1
  void* dz;                  // [n_rows][dz_stride] of the kernel's dZ type: the chunk's columns
  unsigned char* tile_mask;  // FILTER: [row tiles][ceil(chunk_cols / BN)], 0 = tile is all zero
  // The kept chunk (linear_logp/fwd_keep.cuh, bwd_kept_dz.cuh): [ceil(chunk_cols / BN)][n_rows], the
  // partial of each row over each column tile of the chunk, as the forward's combine reads them; its
  // max is the tile max the kept logits are relative to. Null in the dZ kernel.
  RowPartial* tile_partials;
  long long n_rows;
  long long hidden_stride;
  long long weight_stride;
  long long dz_stride;       // a multiple of 8, >= chunk_cols
  long long vocab_start;     // global id of W's row 0
  long long valid_vocab;     // global: targets outside [0, valid_vocab) give zero rows
  long long ignore_index;    // rows with this target give zero rows
  int chunk_begin;           // shard column of the chunk's column 0
  int chunk_cols;            // columns of the chunk; dZ columns up to the next multiple of 8 are written
  // Columns of the shard before valid_vocab (0 to V_LOCAL): the columns with logits. The kernels
  // that are not specialized for the shard read it here (the Hopper loop's dZ kernel, the kept
  // chunk's two); the portable dZ kernel has it as V_VALID.
  int valid_local;
  float inv_temperature;
  float filter_threshold;    // FILTER: tiles whose |dZ| are all below it are written as zeros
};

// The kernel's parameter: the arguments and, on the Hopper loop (WGMMA), the TMA maps of X
// [n_rows][H] (two: common/row_tile_box.cuh), of W's valid rows [valid_local][H] and of a 16-bit
// dZ, encoded by the host for each launch (runtime/ops/tensor_maps.cpp); unused (zeros) otherwise.
struct LinearLogpBwdDzParams {
  LinearLogpBwdDzArgs args;
  TmaDescriptor x_map;
  TmaDescriptor x_tail_map;
  TmaDescriptor w_map;
  TmaDescriptor dz_map;  // 16-bit dZ [n_rows][padded chunk columns], written in 16 x 64 boxes
  StreamKPlan split;  // the Hopper loop's tiles among its blocks (templates/common/stream_k.cuh)
  // Rows of x_tail_map's boxes, for a last row tile of fewer rows than BM.
  int x_tail_box_rows;
};

}  // namespace kernels
}  // namespace shardjit
