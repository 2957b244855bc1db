// Tensor-core main loop of the Hopper path (wgmma, sm_90a) for GEMM-shaped kernels whose operands
// are both K contiguous (X and W of the forward and of the dZ kernel). It reads the stages of the
// TMA ring (templates/common/tma_ring.cuh) and hands the tile to the same epilogues as
// MmaTileMainloop (templates/common/mma_mainloop.cuh), through store_columns.
//
// The block's two compute warpgroups each own 64 rows of the 128 x 256 tile and issue, per
// 64-wide K slice, four wgmma m64n256k16 that read A and B straight from shared memory (no
// ldmatrix, no fragments in registers): 128 fp32 accumulators a thread, as the mma.sync loop's
// 64 x 64 warp blocks. The stages' 128-byte rows with chunk c of row r at slot c ^ (r % 8) are
// the 128-byte swizzle that TMA writes and wgmma reads; each stage starts on a 1024-byte
// boundary (checked once per block, see wgmma_check_alignment).
//
// issue() only starts a slice; wait<N>() lets N committed slices stay in flight, so the kernel
// can release a stage while the next slice runs.
#pragma once

#include "common/ptx.cuh"
#include "common/ptx_wgmma.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK>
struct WgmmaTileMainloop {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(BM < 0, "the wgmma main loop needs the sm_90a target (WGMMA = true only on Hopper)");
#endif
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the wgmma main loop takes bf16 or fp16");
  static_assert(BM == 128 && BN == 256 && BK == 64,
                "the wgmma main loop runs 128 x 256 tiles of 64-wide K slices (128-byte rows)");
  static constexpr int kThreads = 256;  // the compute warpgroups
  static constexpr int kWarpGroupRows = 64;
  static constexpr int kAccumulators = BN / 2;  // 64 x BN per warpgroup of 128 threads

  float acc[kAccumulators];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.0f;
  }

  // Starts the wgmma of one BK slice: a_stage is the stage's A tile [BM][BK], b_stage its B
  // tile [BN][BK]; they run while the thread goes on, and count as one committed group.
  __device__ __forceinline__ void issue(const T* a_stage, const T* b_stage, int warp) {
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
  }

  // Waits until at most IN_FLIGHT issued slices are still running; with 0 the accumulators are
  // final and may be read.
  template <int IN_FLIGHT>
  __device__ __forceinline__ void wait() {
    wgmma_wait_group<IN_FLIGHT>();
    fence_accumulators();
  }

  // Writes the columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the fp32 tile [BM][ld],
  // whose column 0 is tile column chunk * COLS (as MmaTileMainloop::store_columns). Every warp
  // holds 16 rows of every column, so every warp stores in every chunk.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* tile, int ld, int chunk, int warp, int lane) const {
    static_assert(BN % COLS == 0 && COLS % 8 == 0, "chunks hold whole n8 column groups");
    const int row = (warp / 4) * kWarpGroupRows + (warp % 4) * 16 + (lane >> 2);
    const int col = (lane & 3) * 2;
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
