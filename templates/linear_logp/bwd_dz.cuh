// Backward of LinearLogp, first step: for a BM-row tile of X and a BN-column tile of one
// vocabulary chunk, recompute the logits z = (X W^T + b) / T exactly as the forward does (same
// main loops), then write dZ, the gradient with respect to X W^T + b, to the chunk's buffer. This
// is the kernel of the portable loops, which hand the finished tile over through the fp32 logit
// tile in shared memory, in the forward's column chunks (templates/linear_logp/bwd_dz_epilogue.cuh);
// on the Hopper loop the dZ kernel is linear_logp_bwd_dz_hopper (bwd_dz_hopper.cuh), which works
// in the accumulators. The GEMMs of templates/gemm/gemm.cuh then turn dZ into grad_hidden and
// grad_weight.
//
// Tiles: ceil(n_rows / BM) row tiles by ceil(chunk_cols / BN) column tiles of the chunk, walked in
// groups of kTileGroupRows row tiles (common/tile_order.cuh): a wave then reads a
// few X row tiles, kept in L2 for the group's next wave, against many W tiles, each read by the
// group's blocks at about the same time and then streamed out. Grid: x = row tiles, y = column
// tiles, a tile a block. Block: linear_logp_bwd_dz_block_threads(false), dynamic shared memory
// linear_logp_bwd_dz_smem_bytes(sizeof(T), BM, BN, BK, STAGES, false). The loops are fed by
// cp.async from every thread (templates/common/slice_ring.cuh).
//
// FILTER: a BM x BN tile whose |dZ| (unscaled) all lie below filter_threshold is written as zeros
// (by the epilogue) and marked 0 in tile_mask, so that the GEMMs skip it.
#pragma once

#include "common/cp_async_tile.cuh"
#include "common/ptx.cuh"
#include "common/tile_order.cuh"
#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/bwd_dz_tile.cuh"
#include "linear_logp/logit_block_shape.cuh"
#include "linear_logp/logit_mainloop.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, class DZ, int H, int V_LOCAL, int V_VALID, int BM,
          int BN, int BK, int STAGES, bool FILTER>
__global__ void __launch_bounds__(linear_logp_bwd_dz_block_threads(false), 1)
    linear_logp_bwd_dz(const __grid_constant__ LinearLogpBwdDzParams params) {
  static_assert(LogitBlockShape<H, V_LOCAL, V_VALID, BM, BN, BK, STAGES>::valid, "the block shape is checked there");
  static_assert(is_same_type<DZ, T>::value || is_same_type<DZ, float>::value,
                "dZ is kept in the input type or in fp32");

  constexpr int kThreads = linear_logp_bwd_dz_threads;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kKSlices = (H + BK - 1) / BK;
  constexpr int kStageElems = (BM + BN) * BK;
  // As in the forward: blocks of more than 16384 accumulators (64 x 64 a warp) have no registers
  // left for a pointer per copied chunk.
  constexpr bool kStridedCopy = BM * BN > 16384;
  using XCopy = typename CpAsyncTileFor<T, BM, BK, H, kThreads, kStridedCopy>::type;
  using WCopy = typename CpAsyncTileFor<T, BN, BK, H, kThreads, kStridedCopy, L2Priority::kEvictFirst>::type;
  using Mainloop = typename LogitMainloop<T, BM, BN, BK>::type;
  using Epilogue = DzEpilogue<BiasT, TargetT, DZ, BM, BN, logit_chunk_cols(BM, BN), V_VALID, FILTER, kThreads>;

  extern __shared__ __align__(128) unsigned char linear_logp_bwd_dz_smem[];
  unsigned char* const smem = linear_logp_bwd_dz_smem;
  const LinearLogpBwdDzArgs& args = params.args;
  T* const ring = reinterpret_cast<T*>(smem);
  Epilogue epilogue(smem, smem + linear_logp_bwd_dz_ring_bytes(kElem, BM, BN, BK, STAGES));

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const DzTile<DZ, BM, BN, FILTER> tile(args, linear_block_index(), gridDim.x, gridDim.y);
  const long long row0 = tile.row0;
  const int rows = tile.rows;
  const int c0 = tile.c0;
  const int n0 = tile.n0;
  DZ* const out = tile.out;
  unsigned char* const mask = tile.mask;

  // A tile wholly in the padding (or past the shard) has no logits to compute.
  if (n0 >= V_VALID) {
    epilogue.store_zero_tile(c0, rows, args, out, warp, lane);
    if (FILTER && tid == 0) *mask = 0;
    return;
  }

  epilogue.init(args, row0, tid);  // published by the first K-loop barrier

  XCopy x_copy;
  x_copy.set_rows(static_cast<const T*>(args.hidden), args.hidden_stride, row0, args.n_rows, tid);
  WCopy w_copy;
  w_copy.set_rows(static_cast<const T*>(args.weight), args.weight_stride, n0, V_VALID, tid);
  int load_slice = 0;
  int load_slot = 0;
  // Always commits, even past the last slice, so that the group count stays in step with the
  // consumer's cp_async_wait_group.
  auto load_next = [&]() {
    if (load_slice < kKSlices) {
      const unsigned int slot = smem_addr(ring + load_slot * kStageElems);
      x_copy.issue(slot, load_slice * BK);
      w_copy.issue(slot + BM * BK * kElem, load_slice * BK);
      ++load_slice;
      load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
    }
    cp_async_commit_group();
  };
#pragma unroll
  for (int s = 0; s < ring_prefetch_slices<Mainloop, STAGES>(); ++s) load_next();

  Mainloop mainloop;
  mainloop.clear();
  int read_slot = 0;
#pragma unroll 1
  for (int slice = 0; slice < kKSlices; ++slice) {
    wait_for_slice<Mainloop, STAGES>();
    const T* const slot = ring + read_slot * kStageElems;
    mainloop.compute(slot, slot + BM * BK, warp, lane, load_next);
    read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
  }
  cp_async_wait_group<0>();
  const bool keep = epilogue.consume_tile(mainloop, n0, c0, rows, args, out, warp, lane);
  if (FILTER && tid == 0) *mask = keep ? 1 : 0;
}

}  // namespace kernels
}  // namespace shardjit
