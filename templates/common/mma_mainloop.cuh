// Tensor-core main loop of the portable path (mma.sync m16n8k16, sm_80 and later), for every
// GEMM-shaped kernel: the block's BM x BN tile is accumulated in fp32 one BK slice of a cp.async
// pipeline at a time, from swizzled shared-memory tiles, then handed to the kernel's epilogue,
// either through a shared-memory fp32 tile (store, store_columns) or pair by pair from the
// registers (for_each_pair).
//
// Eight warps as 2 (M) x 4 (N), or 4 x 2 for 256-row tiles; each owns a kWarpM x kWarpN block
// of MT x NT mma tiles, at most 64 x 64 (128 accumulators a thread). The wider the warp's block,
// the fewer ldmatrix per mma (a 64 x 64 block loads 8 fragments for 32 mma, 64 x 32 loads 6 for
// 16), and the wider the block's tile, the fewer bytes each mma pulls through L2.
//
// Each operand tile lies in shared memory K contiguous ([rows][BK], plain ldmatrix: X and W of
// the forward, dZ as A of grad_hidden) or M / N contiguous ([BK][cols], ldmatrix.trans: dZ read
// as A^T for grad_weight, and B [k][n] of the GEMM); both hand the mma the same fragments.
// The forward and the dZ kernel run its K contiguous x K contiguous case
// (templates/linear_logp/logit_mainloop.cuh) where the Hopper loop does not.
#pragma once

#include "common/operand_layout.cuh"
#include "common/ptx.cuh"
#include "common/swizzle.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

// Addressing of one operand tile: EXTENT indices of M (for A) or N (for B) by BK of K, its rows
// swizzled by swizzled_chunk_any.
template <MmaOperand LAYOUT, int EXTENT, int BK>
struct MmaOperandTile {
  static constexpr bool kKContiguous = LAYOUT == MmaOperand::kKContiguous;
  static_assert(LAYOUT != MmaOperand::kMNContiguousBlocks, "the TMA box layout is read by the wgmma loop only");
  static constexpr int kChunksPerRow = (kKContiguous ? BK : EXTENT) / 8;

  // ldmatrix.x4 in which this lane addresses row r8 of the 8 x 8 matrix whose corner is M (or N)
  // index x, K index k (both multiples of 8, non-negative). Lane l receives the elements (x + l / 4,
  // k + 2 (l % 4) + {0, 1}) of its matrix either way: the transposing load of an M / N contiguous
  // tile gives what the plain load of a K contiguous one does.
  static __device__ __forceinline__ void load_x4(unsigned int (&r)[4], unsigned int base, int x, int k,
                                                 int r8) {
    if constexpr (kKContiguous) {
      const int chunk = swizzled_chunk_any<kChunksPerRow>(x + r8, k >> 3);
      ldmatrix_x4(r, base + 16u * static_cast<unsigned int>(chunk));
    } else {
      const int chunk = swizzled_chunk_any<kChunksPerRow>(k + r8, x >> 3);
      ldmatrix_x4_trans(r, base + 16u * static_cast<unsigned int>(chunk));
    }
  }
};

template <class T, int BM, int BN, int BK, MmaOperand A_LAYOUT, MmaOperand B_LAYOUT>
struct MmaTileMainloop {
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the mma main loop takes bf16 or fp16");
  static constexpr int kThreads = 256;
  // ldmatrix reads the copies through the generic proxy: the slice's barrier is enough.
  static constexpr bool kAsyncProxyReads = false;
  // compute returns with the slice's mma done (see templates/linear_logp/logit_mainloop.cuh).
  static constexpr int kSlicesInFlight = 0;
  static constexpr int kWarpsM = BM >= 256 ? 4 : 2;
  static constexpr int kWarpsN = kThreads / 32 / kWarpsM;
  static constexpr int kWarpM = BM / kWarpsM;
  static constexpr int kWarpN = BN / kWarpsN;
  static constexpr int kMTiles = kWarpM / 16;
  static constexpr int kNTiles = kWarpN / 8;
  // fp32 accumulators a thread holds.
  static constexpr int kAccumulators = kMTiles * kNTiles * 4;
  static_assert(BM % (16 * kWarpsM) == 0 && BN % (16 * kWarpsN) == 0 && BK % 16 == 0,
                "tile shape");
  static_assert(kNTiles % 2 == 0, "B fragments are loaded 16 columns at a time");
  static_assert(kMTiles * kNTiles <= 32, "at most 64 x 64 accumulators a warp (registers)");
  using ATile = MmaOperandTile<A_LAYOUT, BM, BK>;
  using BTile = MmaOperandTile<B_LAYOUT, BN, BK>;

  float acc[kMTiles][kNTiles][4];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
  }

  static __device__ __forceinline__ void mma(float (&d)[4], const unsigned int (&a)[4],
                                             unsigned int b0, unsigned int b1) {
    if constexpr (is_same_type<T, bf16>::value) {
      mma_m16n8k16_bf16f32(d, a, b0, b1);
    } else {
      mma_m16n8k16_f16f32(d, a, b0, b1);
    }
  }

  // Loads the A and B fragments of k16 step kk of the stage. (a_x, a_k) and (b_x, b_k) are the
  // corners of the 8 x 8 matrix this lane addresses in the warp's first fragment of each.
  __device__ __forceinline__ void load_fragments(unsigned int (&a)[kMTiles][4],
                                                 unsigned int (&b)[kNTiles][2], unsigned int a_base,
                                                 unsigned int b_base, int a_x, int a_k, int b_x,
                                                 int b_k, int r8, int kk) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      ATile::load_x4(a[mt], a_base, a_x + mt * 16, a_k + kk * 16, r8);
    }
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      unsigned int r[4];
      BTile::load_x4(r, b_base, b_x + np * 16, b_k + kk * 16, r8);
      b[2 * np][0] = r[0];
      b[2 * np][1] = r[1];
      b[2 * np + 1][0] = r[2];
      b[2 * np + 1][1] = r[3];
    }
  }

  // Accumulates one BK slice: a_stage is the stage's A tile, b_stage its B tile.
  // Fragments are double-buffered so that the loads of step kk + 1 overlap the mma of step kk.
  // `between` (the pipeline's next copies) runs once the first fragments are requested, so the
  // tensor cores are fed right after the pipeline barrier rather than after the copy issue.
  template <class Between>
  __device__ __forceinline__ void compute(const T* a_stage, const T* b_stage, int warp, int lane,
                                          Between&& between) {
    const unsigned int a_base = smem_addr(a_stage);
    const unsigned int b_base = smem_addr(b_stage);
    const int m0 = (warp / kWarpsN) * kWarpM;
    const int n0 = (warp % kWarpsN) * kWarpN;
    // ldmatrix.x4 matrix q = lane / 8 is, for A: rows +8 (q & 1), k +8 (q >> 1) (a0..a3 of the
    // m16k16 fragment); for B: columns +8 (q >> 1), k +8 (q & 1) (b0, b1 of two n8 tiles).
    const int q = lane >> 3;
    const int r8 = lane & 7;
    const int a_x = m0 + (q & 1) * 8;
    const int a_k = (q >> 1) * 8;
    const int b_x = n0 + (q >> 1) * 8;
    const int b_k = (q & 1) * 8;
    constexpr int kSteps = BK / 16;
    unsigned int a[2][kMTiles][4];
    unsigned int b[2][kNTiles][2];
    load_fragments(a[0], b[0], a_base, b_base, a_x, a_k, b_x, b_k, r8, 0);
    between();
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      if (kk + 1 < kSteps) {
        load_fragments(a[(kk + 1) & 1], b[(kk + 1) & 1], a_base, b_base, a_x, a_k, b_x, b_k, r8,
                       kk + 1);
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
          mma(acc[mt][nt], a[kk & 1][mt], b[kk & 1][nt][0], b[kk & 1][nt][1]);
        }
    }
  }

  // Writes all the accumulators to the fp32 tile [BM][ld].
  __device__ __forceinline__ void store(float* tile, int ld, int warp, int lane) const {
    store_block(tile, ld, (warp % kWarpsN) * kWarpN, warp, lane);
  }

  // Writes the columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the fp32 tile [BM][ld],
  // whose column 0 is tile column chunk * COLS: the epilogue then takes the tile one chunk at a
  // time, and the fp32 tile needs only COLS columns. A warp's block lies wholly in one chunk, so
  // each warp either stores all its accumulators or none.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* tile, int ld, int chunk, int warp,
                                                int lane) const {
    static_assert(BN % COLS == 0 && COLS % kWarpN == 0, "chunks hold whole warp blocks");
    const int col0 = (warp % kWarpsN) * kWarpN - chunk * COLS;
    if (col0 >= 0 && col0 < COLS) store_block(tile, ld, col0, warp, lane);
  }

  // Adjacent accumulator pairs a thread holds, and pair i of them (i < kPairs; a compile-time
  // index once the caller's loop is unrolled): c0, c1 (h = 0) and c2, c3 (h = 1) of m16n8 tile
  // (mt, nt) are row g (+ 8 h), columns 2t, 2t + 1 of the tile (g = lane / 4, t = lane % 4).
  static constexpr int kPairs = kAccumulators / 2;
  __device__ __forceinline__ AccumulatorPair pair(int i, int warp, int lane) const {
    const int mt = i / (2 * kNTiles);
    const int nt = (i / 2) % kNTiles;
    const int h = i % 2;
    const int row = (warp / kWarpsN) * kWarpM + (lane >> 2) + mt * 16 + 8 * h;
    const int col = (warp % kWarpsN) * kWarpN + (lane & 3) * 2 + nt * 8;
    return {row, col, acc[mt][nt][2 * h], acc[mt][nt][2 * h + 1]};
  }

 private:
  // The warp's block, its column 0 at column col0 of the fp32 tile (pairs as in for_each_pair).
  __device__ __forceinline__ void store_block(float* tile, int ld, int col0, int warp,
                                              int lane) const {
    const int row = (warp / kWarpsN) * kWarpM + (lane >> 2);
    const int col = col0 + (lane & 3) * 2;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        float* p = tile + (row + mt * 16) * ld + col + nt * 8;
        *reinterpret_cast<float2*>(p) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(p + 8 * ld) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
  }
};

}  // namespace kernels
}  // namespace shardjit
