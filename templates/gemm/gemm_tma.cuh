// The GEMM's Hopper tile (templates/gemm/gemm.cuh with TMA): 128 x 256 x 64 tiles of 16-bit
// operands, copied by TMA from a producer warp into the ring of templates/common/tma_ring.cuh and
// multiplied by the two warpgroups of the wgmma loop.
//
// The TMA boxes (templates/common/operand_layout.cuh, kMNContiguousBlocks) write M / N
// contiguous operands as 64-wide column blocks of 64 K rows (128-byte swizzle, boxes of 128
// bytes a row), K contiguous ones as 128-byte rows: what wgmma reads. Boxes past the tensors'
// extents arrive as zeros, so rows past m, columns past a_cols and rows of B past b_rows read as
// zeros as in the cp.async copiers.
#pragma once

#include "common/tile_order.cuh"
#include "common/tma_ring.cuh"
#include "gemm/gemm_args.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_layout.cuh"

namespace shardjit {
namespace kernels {

template <class TA, class OutT, class AddT, bool A_TRANS, int STAGES, class NextSlice>
__device__ __forceinline__ void gemm_tma_tile(const GemmParams& params, unsigned char* smem, NextSlice&& next_slice) {
  constexpr int kBM = 128;
  constexpr int kBN = 256;
  constexpr int kBK = 64;
  constexpr int kBox = 64;                                 // a box is 64 elements (128 bytes) wide
  constexpr unsigned int kABytes = kBM * kBK * 2;
  constexpr unsigned int kBlockBytes = kBK * kBox * 2;     // one 64 x 64 box
  using Ring = TmaRing<STAGES, kABytes + kBK * kBN * 2, kABytes>;
  using Mainloop = WgmmaTileMainloop<TA, kBM, kBN, kBK, 1,
                                     A_TRANS ? MmaOperand::kMNContiguousBlocks : MmaOperand::kKContiguous,
                                     MmaOperand::kMNContiguousBlocks>;
  const GemmArgs& args = params.args;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const Ring ring(smem);
  const TileIndex tile = grouped_tile_index(linear_block_index(), gridDim.x, gridDim.y, kGemmGroupRows);
  const int m0 = tile.m * kBM;
  const int n0 = tile.n * kBN;
  const int slices = static_cast<int>((args.k + kBK - 1) / kBK);
  ring.init(tid);

  if (Ring::in_producer_warpgroup(warp)) {
    Ring::enter_producer();
    if (!Ring::is_producer(warp)) return;
    // Lane 0 issues; the whole warp walks the loop so that it can ask L2 for the addend tile
    // together, kGemmAddendPrefetchSlices slices before the compute warps finish (the producer
    // runs about STAGES slices ahead of them).
    const int prefetch_at = slices - kGemmAddendPrefetchSlices + STAGES;
    bool prefetched = args.addend == nullptr;
    TmaRingCursor<STAGES> at;
    for (int slice = next_slice(0); slice < slices; slice = next_slice(slice + 1)) {
      if (!prefetched && slice >= prefetch_at) {
        gemm_prefetch_addend<AddT, kBM, kBN, 32>(args, m0, n0, lane);
        prefetched = true;
      }
      if (lane == 0) {
        const int k0 = slice * kBK;
        ring.produce(at, [&](unsigned int dst, unsigned int full) {
          if constexpr (A_TRANS) {
            // A^T [k][m]: two 64-column blocks of the tile's 128 M indices.
            tma_load_2d(dst, &params.a_map, m0, k0, full);
            tma_load_2d(dst + kBlockBytes, &params.a_map, m0 + kBox, k0, full);
          } else {
            tma_load_2d(dst, &params.a_map, k0, m0, full);  // A [m][k]: 128 rows of 128 bytes
          }
#pragma unroll
          for (int j = 0; j < kBN / kBox; ++j) {
            tma_load_2d(dst + kABytes + j * kBlockBytes, &params.b_map, n0 + j * kBox, k0, full);
          }
        });
      }
      __syncwarp();
      at.advance();
    }
    if (!prefetched) {
      gemm_prefetch_addend<AddT, kBM, kBN, 32>(args, m0, n0, lane);
    }
    return;
  }
  Ring::enter_compute();

  // The compute warps need only how many slices arrive: counted before the loop, so that no mask
  // read sits among its wgmma (ptxas would serialize them, C7515).
  int count = 0;
  for (int slice = next_slice(0); slice < slices; slice = next_slice(slice + 1)) ++count;
  Mainloop mainloop;
  mainloop.clear();
  TmaRingCursor<STAGES> at;
  ring.template consume<TA>(mainloop, at, count, warp, lane);

  GemmEpilogue<OutT, AddT>::of(args).store_tile(mainloop, m0, n0, warp, lane);
}

}  // namespace kernels
}  // namespace shardjit
