// The forward on the split logit tiles: the shard's logit tiles walked as the dZ kernel walks a
// chunk's on the Hopper loop (logit_tiles_hopper.cuh), each giving one partial a row
// (KeptLogitsEpilogue without the kept logits, fwd_keep_epilogue.cuh), which the combine merges.
//
// Why a second forward: the forward kernel (fwd_hopper.cuh) gives a block whole tiles, so a call
// of a few row tiles over a small shard fills the multiprocessors in steps of a tile (333 rows of
// a 16032-column shard: 189 tiles on 132 multiprocessors take two tile times where 1.43 would
// do). Here the last wave's tiles are cut along K among all the blocks (templates/common/
// stream_k.cuh), and the piece that arrives last merges the pieces' sums before the fold. The
// host runs it where that plan ends sooner (logit_tiles_pay, runtime/ops/linear_logp/fwd.hpp).
//
// Parameters: those of the dZ kernel (LinearLogpBwdDzParams), with chunk_begin 0, chunk_cols the
// shard's valid columns rounded up to the tile, and tile_partials the partials, a source a column
// tile; dz, lse, the upstream gradients, scale and tile_mask are not read. Grid, block and shared
// memory: the dZ kernel's on the Hopper loop (launch_linear_logp_bwd_dz). Specialized for the
// types and the tile only.
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
    linear_logp_fwd_tiles(const __grid_constant__ LinearLogpBwdDzParams params) {
  static_assert(LogitTileShape<BM, BN, BK, STAGES>::valid, "the tile is checked there");
  extern __shared__ __align__(128) unsigned char linear_logp_fwd_tiles_smem[];
  using Epilogue = KeptLogitsEpilogue<BiasT, TargetT, WgmmaTileMainloop<T, BM, BN, BK, 1>, false>;
  logit_tiles_hopper<T, Epilogue, BM, BN, BK, STAGES>(params, linear_logp_fwd_tiles_smem);
}

}  // namespace kernels
}  // namespace shardjit
