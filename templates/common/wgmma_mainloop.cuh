// Tensor-core main loop of the Hopper path (wgmma, sm_90a) for GEMM-shaped kernels whose operands
// are both K contiguous (X and W of the forward and of the dZ kernel): a drop-in for
// MmaTileMainloop<T, 128, 256, 64, kKContiguous, kKContiguous> (templates/common/mma_mainloop.cuh)
// on the same cp.async pipeline, the same swizzled shared-memory tiles and the same hand-off
// (store_columns) to the epilogues.
//
// The block's two warpgroups each own 64 rows of the 128 x 256 tile and issue, per 64-wide K
// slice, four wgmma m64n256k16 that read A and B straight from shared memory (no ldmatrix, no
// fragments in registers): 128 fp32 accumulators a thread, as the mma.sync loop's 64 x 64 warp
// blocks. The tiles' 128-byte rows with chunk c of row r at slot c ^ (r % 8) are exactly the
// 128-byte swizzle wgmma reads, so the copier is shared; the stage must start on a 1024-byte
// boundary (checked once per block by the kernels, see wgmma_check_alignment).
//
// IN_FLIGHT is how many slices' wgmma compute may leave running when it returns (0 or 1). With 0
// the next slice's barrier frees the slot just read, as in the mma.sync loop, but the tensor
// cores run dry at every barrier. With 1 they stay busy across it: the slot of slice k - 2 is
// the free one at slice k's barrier, so the ring needs a stage more for the same prefetch
// (see ring_prefetch_slices), and the kernel calls finish() before it reads the accumulators.
// Between issue and wait the pipeline's next copies are issued (`between`), so they overlap
// the tensor cores' work.
//
// Accumulator layout (the fragment of wgmma's m64nN D, as mma.sync's m16n8 per warp): thread
// (warp, lane) holds acc[4 g + 2 h + e] = tile element (fragment_row(warp, lane, h),
// fragment_col(lane, g, e)) for column group g < BN / 8, row half h < 2 and e < 2.
#pragma once

#include "common/ptx.cuh"
#include "common/ptx_wgmma.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, int IN_FLIGHT>
struct WgmmaTileMainloop {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(BM < 0, "the wgmma main loop needs the sm_90a target (WGMMA = true only on Hopper)");
#endif
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the wgmma main loop takes bf16 or fp16");
  static_assert(BM == 128 && BN == 256 && BK == 64,
                "the wgmma main loop runs 128 x 256 tiles of 64-wide K slices (128-byte rows)");
  static_assert(IN_FLIGHT == 0 || IN_FLIGHT == 1, "at most one slice of wgmma is left in flight");
  static constexpr int kThreads = 256;
  static constexpr int kSlicesInFlight = IN_FLIGHT;
  // The kernel fences its cp.async copies into the async proxy before each slice's barrier.
  static constexpr bool kAsyncProxyReads = true;
  static constexpr int kWarpGroupRows = 64;
  static constexpr int kAccumulators = BN / 2;  // 64 x BN per warpgroup of 128 threads
  static constexpr int kColumnGroups = BN / 8;

  float acc[kAccumulators];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.0f;
  }

  // Accumulates one BK slice: a_stage is the stage's A tile [BM][BK], b_stage its B tile [BN][BK].
  template <class Between>
  __device__ __forceinline__ void compute(const T* a_stage, const T* b_stage, int warp, int /*lane*/,
                                          Between&& between) {
    constexpr int kRowBytes = BK * static_cast<int>(sizeof(T));
    const int group = warp / 4;
    const unsigned long long a_desc =
        wgmma_descriptor_k128b(smem_addr(a_stage) + static_cast<unsigned int>(group * kWarpGroupRows * kRowBytes));
    const unsigned long long b_desc = wgmma_descriptor_k128b(smem_addr(b_stage));
    fence_accumulators();
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // A k16 step is 32 bytes further along the rows: + 2 in the descriptor's address field.
      const unsigned long long step = static_cast<unsigned long long>(kk * 2);
      wgmma_m64n256k16<T>(acc, a_desc + step, b_desc + step, 1);
    }
    wgmma_commit_group();
    between();
    wgmma_wait_group<IN_FLIGHT>();
    fence_accumulators();
  }

  // Waits for the slices left in flight: call before reading or clearing the accumulators.
  __device__ __forceinline__ void finish() {
    if constexpr (IN_FLIGHT > 0) {
      wgmma_wait_group<0>();
      fence_accumulators();
    }
  }

  __device__ static __forceinline__ int fragment_row(int warp, int lane, int half) {
    return (warp / 4) * kWarpGroupRows + (warp % 4) * 16 + (lane >> 2) + 8 * half;
  }
  __device__ static __forceinline__ int fragment_col(int lane, int group, int e) {
    return group * 8 + (lane & 3) * 2 + e;
  }

  // Writes the columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the fp32 tile [BM][ld],
  // whose column 0 is tile column chunk * COLS (as MmaTileMainloop::store_columns). Every warp
  // holds 16 rows of every column, so every warp stores in every chunk.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* tile, int ld, int chunk, int warp, int lane) const {
    static_assert(BN % COLS == 0 && COLS % 8 == 0, "chunks hold whole n8 column groups");
    const int row = fragment_row(warp, lane, 0);
    const int col = fragment_col(lane, 0, 0);
    constexpr int kGroups = COLS / 8;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const float* const a = acc + 4 * (chunk * kGroups + g);
      float* const p = tile + row * ld + col + g * 8;
      *reinterpret_cast<float2*>(p) = make_float2(a[0], a[1]);
      *reinterpret_cast<float2*>(p + 8 * ld) = make_float2(a[2], a[3]);
    }
  }

 private:
  __device__ __forceinline__ void fence_accumulators() {
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) fence_register(acc[i]);
  }
};

// The wgmma descriptors address the 128-byte swizzle through absolute shared-memory address
// bits, so the pipeline ring must start on a 1024-byte boundary. Dynamic shared memory does on
// every current part; a block that finds otherwise stops with a trap rather than compute garbage.
__device__ __forceinline__ void wgmma_check_alignment(const void* ring) {
  if ((smem_addr(ring) & 1023u) != 0) __trap();
}

}  // namespace kernels
}  // namespace shardjit
