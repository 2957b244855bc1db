// General matrix product out = alpha * A B + addend (templates/gemm/gemm_args.cuh) with fp32
// accumulation, for the backward of LinearLogp: grad_hidden = dZ W (A = dZ) and
// grad_weight = dZ^T X (A_TRANS, A = dZ). Same structure as the forward: a cp.async
// multi-stage pipeline of swizzled tiles feeding a main loop (for 16-bit operands wgmma on
// sm_90a with WGMMA, mma.sync otherwise; fp32 FMA for fp32 A), then an epilogue policy (store, or
// accumulate into an existing buffer).
//
// Grid: x = ceil(m / BM), y = ceil(n / BN); with TMA, x only (stream_k_grid: a block a tile, or
// persistent blocks, or the runs of a split). Block: gemm_block_threads(TMA), dynamic shared
// memory gemm_smem_bytes(sizeof(TA), sizeof(TB), sizeof(OutT), BM, BN, BK, STAGES, TMA). Each
// output tile is computed by one block walking K in a fixed order, or by a split's pieces added
// in piece order: results do not depend on the launch or the data.
//
// TMA (with WGMMA, sm_90a): the operands (and the addend) are copied by TMA from a producer warp
// instead of cp.async from every thread (templates/gemm/gemm_tma.cuh); the products and
// epilogues are the same.
//
// FILTER: K slices whose part of A the mask marks as zero are neither loaded nor multiplied.
//
// ROWS_AS_N (TMA only, A [m][k]): tiles of BM output rows (a multiple of 32 up to 256) by BN = 128
// columns that take the rows as wgmma's N (templates/gemm/gemm_tma.cuh).
#pragma once

#include "common/ptx.cuh"
#include "common/slice_ring.cuh"
#include "common/tile_order.cuh"
#include "common/types.cuh"
#include "gemm/gemm_args.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_layout.cuh"
#include "gemm/gemm_mainloop_mma.cuh"
#include "gemm/gemm_mainloop_simt.cuh"
#include "gemm/gemm_tile_copy.cuh"
#include "gemm/gemm_tma.cuh"

namespace shardjit {
namespace kernels {

// Tensor cores when both operands have the same 16-bit type, fp32 FMA otherwise.
template <class TA, class TB, int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA>
struct GemmMainloopFor {
  static_assert(!WGMMA, "the wgmma main loop takes bf16 or fp16 A and B");
  using type = GemmSimtMainloop<TA, TB, BM, BN, BK, A_TRANS>;
};
template <int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA>
struct GemmMainloopFor<bf16, bf16, BM, BN, BK, STAGES, A_TRANS, WGMMA> {
  using type = typename GemmMmaMainloop<bf16, BM, BN, BK, STAGES, A_TRANS, WGMMA>::type;
};
template <int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA>
struct GemmMainloopFor<fp16, fp16, BM, BN, BK, STAGES, A_TRANS, WGMMA> {
  using type = typename GemmMmaMainloop<fp16, BM, BN, BK, STAGES, A_TRANS, WGMMA>::type;
};

// Whether K slice `slice` (of BK) of the block's rows [m0, m0 + BM) touches a nonzero mask block.
template <int BM, int BK, bool A_TRANS>
__device__ __forceinline__ bool gemm_slice_active(const GemmArgs& args, long long m0, int slice) {
  const long long k0 = static_cast<long long>(slice) * BK;
  const long long k1 = (k0 + BK < args.k ? k0 + BK : args.k) - 1;
  const long long m1 = (m0 + BM < args.m ? m0 + BM : args.m) - 1;
  // The slice in A's storage coordinates, inclusive.
  const long long r0 = A_TRANS ? k0 : m0;
  const long long r1 = A_TRANS ? k1 : m1;
  const long long c0 = A_TRANS ? m0 : k0;
  const long long c1 = A_TRANS ? m1 : k1;
  for (long long i = r0 / args.mask_block_rows; i <= r1 / args.mask_block_rows; ++i) {
    for (long long j = c0 / args.mask_block_cols; j <= c1 / args.mask_block_cols; ++j) {
      if (args.mask[i * args.mask_stride + j] != 0) return true;
    }
  }
  return false;
}

// Blocks per multiprocessor the registers are budgeted for: one for the FMA loop, whose
// accumulators and operands would spill under a two-block budget; for the tensor-core loop two
// while its accumulators are at most 64 a thread (the fragments fit 128 registers; the second
// block hides the first's barriers), one for 64 x 64 warp blocks (128 accumulators).
template <class Mainloop>
struct GemmMinBlocks {
  static constexpr int value = 1;
};
template <class T, int BM, int BN, int BK, MmaOperand A, MmaOperand B>
struct GemmMinBlocks<MmaTileMainloop<T, BM, BN, BK, A, B>> {
  static constexpr int value = MmaTileMainloop<T, BM, BN, BK, A, B>::kAccumulators <= 64 ? 2 : 1;
};

// The loop of every thread copying by cp.async (without TMA): a block a tile of the grouped order.
template <class TA, class TB, class OutT, class AddT, bool A_TRANS, int BM, int BN, int BK, int STAGES, bool WGMMA,
          class NextActiveSlice>
__device__ __forceinline__ void gemm_cp_async(const GemmParams& params, unsigned char* gemm_smem,
                                              NextActiveSlice&& next_active_slice) {
  static_assert(BM == 64 || BM == 128 || BM == 256, "BM is 64, 128 or 256");
  static_assert(BN == 64 || BN == 128 || BN == 256, "BN is 64, 128 or 256");
  constexpr int kThreads = gemm_threads;
  constexpr int kABytes = gemm_a_tile_bytes(static_cast<int>(sizeof(TA)), BM, BK);
  constexpr int kStageBytes = gemm_stage_bytes(static_cast<int>(sizeof(TA)), static_cast<int>(sizeof(TB)), BM, BN, BK);
  using ACopy = GemmTileCopy<TA, A_TRANS ? BK : BM, A_TRANS ? BM : BK, kThreads, A_TRANS>;
  using BCopy = GemmTileCopy<TB, BK, BN, kThreads, true>;
  using Mainloop = typename GemmMainloopFor<TA, TB, BM, BN, BK, STAGES, A_TRANS, WGMMA>::type;
  const GemmArgs& args = params.args;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const TileIndex tile = grouped_tile_index(linear_block_index(), gridDim.x, gridDim.y, kTileGroupRows);
  const long long m0 = static_cast<long long>(tile.m) * BM;
  const long long n0 = static_cast<long long>(tile.n) * BN;
  const int slices = static_cast<int>((args.k + BK - 1) / BK);
  auto next_slice = [&](int slice) { return next_active_slice(m0, slice, slices); };

  // A's storage has k rows (A_TRANS) or m; the block's part of it starts at row or column m0.
  ACopy a_copy;
  a_copy.set(static_cast<const TA*>(args.a), args.a_stride, m0, A_TRANS ? args.k : args.m, args.a_cols, tid);
  BCopy b_copy;
  b_copy.set(static_cast<const TB*>(args.b), args.b_stride, n0, args.b_rows, args.n, tid);

  // Producer position and the ring slot it fills next. Always commits, even past the end, so
  // that the group count stays in step with the consumer's cp_async_wait_group.
  int load_slice = next_slice(0);
  int load_slot = 0;
  auto load_next = [&]() {
    if (load_slice < slices) {
      const unsigned int slot = smem_addr(gemm_smem + load_slot * kStageBytes);
      const long long k0 = static_cast<long long>(load_slice) * BK;
      a_copy.issue(slot, k0);
      b_copy.issue(slot + kABytes, k0);
      load_slice = next_slice(load_slice + 1);
      load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
    }
    cp_async_commit_group();
  };

#pragma unroll
  for (int s = 0; s < ring_prefetch_slices<Mainloop, STAGES>(); ++s) load_next();

  Mainloop mainloop;
  mainloop.clear();
  int read_slot = 0;
  auto run_slices = [&](int& slice, int end) {
#pragma unroll 1
    for (; slice < end; slice = next_slice(slice + 1)) {
      // Makes every thread's copies of this slot visible, and frees the slot that the refill
      // issued during compute fills.
      wait_for_slice<Mainloop, STAGES>();
      const unsigned char* const stage = gemm_smem + read_slot * kStageBytes;
      mainloop.compute(reinterpret_cast<const TA*>(stage), reinterpret_cast<const TB*>(stage + kABytes), warp,
                       lane, load_next);
      read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
    }
  };
  // The addend is read from HBM in the epilogue, where nothing overlaps the reads: the block asks
  // L2 for it a few slices before the end. Between two loops rather than in one: a test in the
  // loop makes ptxas serialize its wgmma (C7515).
  int slice = next_slice(0);
  run_slices(slice, slices - kGemmAddendPrefetchSlices);
  gemm_prefetch_addend<AddT, BM, BN, kThreads>(args, m0, n0, tid);
  run_slices(slice, slices);
  cp_async_wait_group<0>();
  if constexpr (Mainloop::kSlicesInFlight > 0) mainloop.finish();

  GemmEpilogue<OutT, AddT>::of(args).store_tile(mainloop, m0, n0, warp, lane);
}

// The main loop the block runs, for the register budget of __launch_bounds__ (the TMA loop's
// blocks take one a multiprocessor whatever its tile).
template <class TA, class TB, int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA, bool TMA>
struct GemmBlockMainloop {
  using type = typename GemmMainloopFor<TA, TB, BM, BN, BK, STAGES, A_TRANS, WGMMA>::type;
};
template <class TA, class TB, int BM, int BN, int BK, int STAGES, bool A_TRANS, bool WGMMA>
struct GemmBlockMainloop<TA, TB, BM, BN, BK, STAGES, A_TRANS, WGMMA, true> {
  using type = void;
};

template <class TA, class TB, class OutT, class AddT, bool A_TRANS, int BM, int BN, int BK,
          int STAGES, bool WGMMA, bool TMA, bool FILTER, bool ROWS_AS_N>
__global__ void __launch_bounds__(
    gemm_block_threads(TMA),
    GemmMinBlocks<typename GemmBlockMainloop<TA, TB, BM, BN, BK, STAGES, A_TRANS, WGMMA, TMA>::type>::value)
    gemm(const __grid_constant__ GemmParams params) {
  static_assert(BM * BN <= 32768, "a tile holds at most 32768 accumulators (registers)");
  static_assert(BK == 16 || BK == 32 || BK == 64, "BK is 16, 32 or 64");
  static_assert(STAGES >= 2 && STAGES <= 4, "STAGES is 2, 3 or 4");
  static_assert(!TMA || (WGMMA && BK == 64 && STAGES == 4 && is_same_type<TA, TB>::value && sizeof(TA) == 2 &&
                         (ROWS_AS_N ? BN == 128 && !A_TRANS : BM == 128 && BN == 256)),
                "the TMA loop runs the wgmma tile, 128 x 256 x 64 (or, with the rows as N, BM x 128 x 64) of "
                "16-bit operands, on four stages");
  static_assert(TMA || !ROWS_AS_N, "the tiles of the rows as N are the TMA loop's");

  const GemmArgs& args = params.args;
  extern __shared__ __align__(128) unsigned char gemm_smem[];
  if constexpr (WGMMA) wgmma_check_alignment(gemm_smem);
  // The first slice at or after `slice`, before `end`, that the rows from tile_m0 need.
  auto next_active_slice = [&](long long tile_m0, int slice, int end) {
    if constexpr (FILTER) {
      while (slice < end && !gemm_slice_active<BM, BK, A_TRANS>(args, tile_m0, slice)) ++slice;
    }
    return slice;
  };
  if constexpr (TMA) {
    gemm_tma<TA, OutT, AddT, A_TRANS, STAGES, BM, ROWS_AS_N>(params, gemm_smem, next_active_slice);
  } else {
    gemm_cp_async<TA, TB, OutT, AddT, A_TRANS, BM, BN, BK, STAGES, WGMMA>(params, gemm_smem, next_active_slice);
  }
}

}  // namespace kernels
}  // namespace shardjit
