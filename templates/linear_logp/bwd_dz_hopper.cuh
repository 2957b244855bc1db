// The dZ kernel on the Hopper loop (sm_90a): the backward's first step as bwd_dz.cuh describes
// it, walking the chunk's logit tiles as logit_tiles_hopper.cuh does, with the dZ epilogue that
// works in the wgmma accumulators (bwd_dz_fragment_epilogue.cuh). Specialized for the input and
// output types and the tile only: H, the shard and its padding come with each launch, so one
// kernel serves every model of a dtype and is built with the library (tools/prebuild).
//
// Parameters: LinearLogpBwdDzParams with the TMA maps of X, of W's valid rows and of a 16-bit
// dZ, and the stream-K plan. Grid: the plan's blocks (at most one a multiprocessor); block
// linear_logp_bwd_dz_block_threads(true); dynamic shared memory
// linear_logp_bwd_dz_smem_bytes(sizeof(T), BM, BN, BK, STAGES, true).
#pragma once

#include "common/types.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_fragment_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/logit_block_shape.cuh"
#include "linear_logp/logit_tiles_hopper.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, class DZ, int BM, int BN, int BK, int STAGES, bool FILTER>
__global__ void __launch_bounds__(linear_logp_bwd_dz_block_threads(true), 1)
    linear_logp_bwd_dz_hopper(const __grid_constant__ LinearLogpBwdDzParams params) {
  static_assert(LogitTileShape<BM, BN, BK, STAGES>::valid, "the tile is checked there");
  static_assert(is_same_type<DZ, T>::value || is_same_type<DZ, float>::value,
                "dZ is kept in the input type or in fp32");
  extern __shared__ __align__(128) unsigned char linear_logp_bwd_dz_hopper_smem[];
  using Epilogue = DzFragmentEpilogue<BiasT, TargetT, DZ, FILTER, WgmmaTileMainloop<T, BM, BN, BK, 1>>;
  logit_tiles_hopper<T, Epilogue, BM, BN, BK, STAGES>(params, linear_logp_bwd_dz_hopper_smem);
}

}  // namespace kernels
}  // namespace shardjit
