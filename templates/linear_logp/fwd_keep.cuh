// The forward's kernel for the first vocabulary chunk of an op that runs its backward (the kept
// chunk): the logit tiles of the chunk's columns, as the dZ kernel walks them on the Hopper loop
// (logit_tiles_hopper.cuh), each giving the forward one partial a row (KeptLogitsEpilogue,
// fwd_keep_epilogue.cuh) and leaving its logits in the dZ buffer, so that a backward of the same
// inputs turns them into the chunk's dZ (bwd_kept_dz.cuh) instead of multiplying X by the chunk's
// rows of W again. The forward kernel (fwd_hopper.cuh) covers the shard's other columns, from
// args.first_tile on, and the combine merges both kernels' partials. Like the other Hopper loop
// kernels it is specialized for the types and the tile only, not for the shape.
//
// Parameters: those of the dZ kernel (LinearLogpBwdDzParams), with dz the kept logits (fp16,
// [n_rows][dz_stride], its TMA map in dz_map), chunk_begin 0, chunk_cols the chunk's width and
// tile_partials the chunk's partials; lse, the upstream gradients, scale and tile_mask are not read.
// Grid, block and shared memory: the dZ kernel's on the Hopper loop (launch_linear_logp_bwd_dz).
#pragma once

#include "common/wgmma_mainloop.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/fwd_keep_epilogue.cuh"
#include "linear_logp/logit_block_shape.cuh"
#include "linear_logp/logit_tiles_hopper.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, int BM, int BN, int BK, int STAGES>
__global__ void __launch_bounds__(linear_logp_bwd_dz_block_threads(true), 1)
    linear_logp_fwd_keep(const __grid_constant__ LinearLogpBwdDzParams params) {
  static_assert(LogitTileShape<BM, BN, BK, STAGES>::valid, "the tile is checked there");
  extern __shared__ __align__(128) unsigned char linear_logp_fwd_keep_smem[];
  using Epilogue = KeptLogitsEpilogue<BiasT, TargetT, WgmmaTileMainloop<T, BM, BN, BK, 1>>;
  logit_tiles_hopper<T, Epilogue, BM, BN, BK, STAGES>(params, linear_logp_fwd_keep_smem);
}

}  // namespace kernels
}  // namespace shardjit
