// The GEMM's Hopper tile (templates/gemm/gemm.cuh with TMA): 128 x 256 x 64 tiles of 16-bit
// operands fed by TMA from a producer warp, beside the two warpgroups that run the wgmma loop.
//
// Why not the cp.async ring of the other main loops: there every thread copies, and the block
// meets at a barrier every slice, so a slice's stage is refilled only after both warpgroups
// passed the next barrier, two slices ahead of its use. Here one warp issues the copies, and a
// stage is refilled as soon as both warpgroups' products on it are done, three slices ahead;
// the compute warps issue nothing but their wgmma and barrier waits.
//
// Ring: STAGES stages of { A tile, B tile } and a pair of mbarriers a stage:
//   full[s]:  the producer's arrive.expect_tx of the stage's bytes; completes when they landed.
//   empty[s]: one arrival per compute warp once its products on the stage are done.
// Waits are parity waits: the j-th fill of a stage is its phase j.
//
// The TMA boxes (templates/common/operand_layout.cuh, kMNContiguousBlocks) write M / N
// contiguous operands as 64-wide column blocks of 64 K rows (128-byte swizzle, boxes of 128
// bytes a row), K contiguous ones as 128-byte rows: what wgmma reads. Boxes past the tensors'
// extents arrive as zeros, so rows past m, columns past a_cols and rows of B past b_rows read as
// zeros as in the cp.async copiers.
#pragma once

#include "common/ptx_tma.cuh"
#include "common/tile_order.cuh"
#include "common/wgmma_mainloop.cuh"
#include "gemm/gemm_args.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_layout.cuh"

namespace shardjit {
namespace kernels {

template <int STAGES>
struct GemmTmaRing {
  static constexpr int kBM = 128;
  static constexpr int kBN = 256;
  static constexpr int kBK = 64;
  static constexpr int kBox = 64;  // a box is 64 elements (128 bytes) wide
  static constexpr unsigned int kABytes = kBM * kBK * 2;
  static constexpr unsigned int kStageBytes = kABytes + kBK * kBN * 2;
  static constexpr unsigned int kBlockBytes = kBK * kBox * 2;  // one 64 x 64 box
  static constexpr unsigned int kComputeWarps = 8;

  unsigned int ring;      // shared address of stage 0 (1024-byte aligned)
  unsigned int barriers;  // full[0..STAGES), then empty[0..STAGES)

  __device__ unsigned int full(int s) const { return barriers + 8u * static_cast<unsigned int>(s); }
  __device__ unsigned int empty(int s) const { return barriers + 8u * static_cast<unsigned int>(STAGES + s); }
  __device__ unsigned int stage(int s) const { return ring + static_cast<unsigned int>(s) * kStageBytes; }
};

// The stage and phase a side of the ring is at; both sides walk the same slices in order.
template <int STAGES>
struct GemmTmaCursor {
  int stage = 0;
  unsigned int phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

template <class TA, class OutT, class AddT, bool A_TRANS, int STAGES, class NextSlice>
__device__ __forceinline__ void gemm_tma_tile(const GemmParams& params, unsigned char* smem, NextSlice&& next_slice) {
  using Ring = GemmTmaRing<STAGES>;
  using Mainloop = WgmmaTileMainloop<TA, Ring::kBM, Ring::kBN, Ring::kBK, 1,
                                     A_TRANS ? MmaOperand::kMNContiguousBlocks : MmaOperand::kKContiguous,
                                     MmaOperand::kMNContiguousBlocks>;
  const GemmArgs& args = params.args;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const Ring ring{smem_addr(smem), smem_addr(smem) + STAGES * Ring::kStageBytes};
  const TileIndex tile = grouped_tile_index(linear_block_index(), gridDim.x, gridDim.y, kGemmGroupRows);
  const int m0 = tile.m * Ring::kBM;
  const int n0 = tile.n * Ring::kBN;
  const int slices = static_cast<int>((args.k + Ring::kBK - 1) / Ring::kBK);

  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(ring.full(s), 1);
      mbarrier_init(ring.empty(s), Ring::kComputeWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();

  if (warp == Ring::kComputeWarps) {
    // Producer: lane 0 issues; the whole warp walks the loop so that it can ask L2 for the
    // addend tile together, kGemmAddendPrefetchSlices slices before the compute warps finish
    // (the producer runs about STAGES slices ahead of them).
    const int prefetch_at = slices - kGemmAddendPrefetchSlices + STAGES;
    bool prefetched = args.addend == nullptr;
    GemmTmaCursor<STAGES> at;
    for (int slice = next_slice(0); slice < slices; slice = next_slice(slice + 1)) {
      if (!prefetched && slice >= prefetch_at) {
        gemm_prefetch_addend<AddT, Ring::kBM, Ring::kBN, 32>(static_cast<const AddT*>(args.addend),
                                                             args.addend_stride, args.m, args.n, m0, n0, lane);
        prefetched = true;
      }
      if (lane == 0) {
        mbarrier_wait_parity(ring.empty(at.stage), at.phase ^ 1u);
        const unsigned int full = ring.full(at.stage);
        mbarrier_arrive_expect_tx(full, Ring::kStageBytes);
        const unsigned int dst = ring.stage(at.stage);
        const int k0 = slice * Ring::kBK;
        if constexpr (A_TRANS) {
          // A^T [k][m]: two 64-column blocks of the tile's 128 M indices.
          tma_load_2d(dst, &params.a_map, m0, k0, full);
          tma_load_2d(dst + Ring::kBlockBytes, &params.a_map, m0 + Ring::kBox, k0, full);
        } else {
          tma_load_2d(dst, &params.a_map, k0, m0, full);  // A [m][k]: 128 rows of 128 bytes
        }
#pragma unroll
        for (int j = 0; j < Ring::kBN / Ring::kBox; ++j) {
          tma_load_2d(dst + Ring::kABytes + j * Ring::kBlockBytes, &params.b_map, n0 + j * Ring::kBox, k0, full);
        }
      }
      __syncwarp();
      at.advance();
    }
    if (!prefetched) {
      gemm_prefetch_addend<AddT, Ring::kBM, Ring::kBN, 32>(static_cast<const AddT*>(args.addend), args.addend_stride,
                                                           args.m, args.n, m0, n0, lane);
    }
    return;
  }

  // The compute warps need only how many slices arrive: counted before the loop, so that no mask
  // read sits among its wgmma (ptxas would serialize them, C7515).
  int count = 0;
  for (int slice = next_slice(0); slice < slices; slice = next_slice(slice + 1)) ++count;
  Mainloop mainloop;
  mainloop.clear();
  GemmTmaCursor<STAGES> at;
  int held = -1;  // the stage whose products may still run
  for (int i = 0; i < count; ++i) {
    mbarrier_wait_parity(ring.full(at.stage), at.phase);
    const unsigned char* const stage = smem + at.stage * Ring::kStageBytes;
    // Issues this slice's products and waits for the previous slice's: its stage is free.
    mainloop.compute(reinterpret_cast<const TA*>(stage), reinterpret_cast<const TA*>(stage + Ring::kABytes), warp,
                     lane, [] {});
    if (held >= 0 && lane == 0) mbarrier_arrive(ring.empty(held));
    held = at.stage;
    at.advance();
  }
  mainloop.finish();

  const GemmEpilogue<OutT, AddT> epilogue{static_cast<OutT*>(args.out),
                                          static_cast<const AddT*>(args.addend),
                                          args.out_stride,
                                          args.addend_stride,
                                          args.m,
                                          args.n,
                                          args.alpha != nullptr ? *args.alpha : 1.0f};
  epilogue.store_tile(mainloop, m0, n0, warp, lane);
}

}  // namespace kernels
}  // namespace shardjit
