// Tensor-core main loop of the Hopper path (wgmma, sm_90a) for GEMM-shaped kernels: a drop-in for
// MmaTileMainloop<T, 128, 256, 64, A_LAYOUT, B_LAYOUT> (templates/common/mma_mainloop.cuh) on the
// same cp.async pipeline, the same swizzled shared-memory tiles and the same hand-offs
// (store_columns, for_each_pair) to the epilogues. The logit kernels (forward, dZ) read both
// operands K contiguous; the backward's GEMM reads B [k][n] N contiguous, and A either way.
//
// The block's two warpgroups each own 64 rows of the 128 x BN tile and issue, per 64-wide K
// slice, four wgmma m64nBNk16 that read A and B straight from shared memory (no ldmatrix, no
// fragments in registers): BN / 2 fp32 accumulators a thread, 128 at BN = 256 as the mma.sync
// loop's 64 x 64 warp blocks. A 256 x BN tile (the forward's tiles of the rows as N, 256
// vocabulary columns by BN rows of X) gives each warpgroup 128 rows, two m64 blocks of them, and
// a thread BN accumulators: each k16 step issues both blocks' wgmma on the same B. BN = 128 and
// 192 serve the forward at calls whose 128 x 256 tiles would leave a wave partly idle
// (docs/perf-notes.md, "Forward tiles per call"), other multiples of 32 the GEMM's tiles that take
// the output's rows as N (templates/gemm/gemm_tma.cuh), 136, 152 and 168 the forward's
// (templates/linear_logp/fwd_hopper.cuh); the other kernels run 256.
// The tiles' layouts (swizzled_chunk_any, templates/common/swizzle.cuh) are wgmma's
// 128-byte swizzle in both orientations (WgmmaOperandTile), so the copiers are shared; the stage
// must start on a 1024-byte boundary (checked once per block by the kernels, see
// wgmma_check_alignment).
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
// fragment_col(lane, g, e)) for column group g < BN / 8, row half h < 2 and e < 2. In a 256-row
// tile, block b's fragment follows block 0's, BN / 2 accumulators later, as row slots 2 b + h
// (accumulator_index, fragment_row).
#pragma once

#include "common/host_device.cuh"
#include "common/operand_layout.cuh"
#include "common/ptx.cuh"
#include "common/ptx_wgmma.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

// Descriptors of one operand tile of 16-bit elements, EXTENT indices of M (A) or N (B) by BK = 64
// of K, in the 128-byte swizzle:
//   K contiguous, [EXTENT][64]: 128-byte rows, one 1024-byte atom per 8 rows; a k16 step is 32
//   bytes along the rows;
//   M / N contiguous, [64][EXTENT] (swizzled_chunk_any): each 8 K rows are EXTENT / 64 atoms side
//   by side (1024 bytes apart), the 8-row groups 16 x EXTENT bytes apart; a k16 step is two groups;
//   M / N contiguous blocks (the TMA boxes): EXTENT / 64 blocks of [64][64], each its 8 atoms
//   down K (1024 bytes apart), the blocks 64 x 128 bytes apart; a k16 step is two atoms.
template <MmaOperand LAYOUT, int EXTENT, int BK>
struct WgmmaOperandTile {
  static_assert(BK == 64, "64-wide K slices");
  static_assert(LAYOUT == MmaOperand::kKContiguous ? EXTENT % 8 == 0 : EXTENT % 64 == 0,
                "K contiguous tiles of whole 8-row groups, M / N contiguous ones of whole 64-index atoms");
  static constexpr bool kKContiguous = LAYOUT == MmaOperand::kKContiguous;
  static constexpr bool kBlocks = LAYOUT == MmaOperand::kMNContiguousBlocks;
  // wgmma's transpose flag: 0 reads the operand K contiguous, 1 M / N contiguous.
  static constexpr int kTranspose = kKContiguous ? 0 : 1;
  // Bytes between 8-row groups along K, and (M / N contiguous) between atoms along M / N.
  static constexpr unsigned int kGroupBytes = kKContiguous || kBlocks ? 1024u : 16u * EXTENT;
  static constexpr unsigned int kAtomBytes = kBlocks ? 128u * BK : 1024u;
  // Descriptor units (16 bytes) a k16 step moves the start address.
  static constexpr unsigned long long kStep = kKContiguous ? 32 / 16 : 2 * kGroupBytes / 16;
  // Descriptor units 64 indices of M / N move the start address (descriptor's `first`).
  static constexpr unsigned long long kBlockStep = (kKContiguous ? 64u * 128u : kAtomBytes) / 16;

  // The descriptor of the tile's M / N indices from `first` on (a multiple of 64).
  static __device__ __forceinline__ unsigned long long descriptor(const void* tile, int first) {
    if constexpr (kKContiguous) {
      return wgmma_descriptor_128b(smem_addr(tile) + static_cast<unsigned int>(first) * 128u, 16u, kGroupBytes);
    } else {
      return wgmma_descriptor_128b(smem_addr(tile) + static_cast<unsigned int>(first / 64) * kAtomBytes, kAtomBytes,
                                   kGroupBytes);
    }
  }
};

// A slice in flight keeps the tensor cores busy across the slice barrier but takes a stage from
// the prefetch (ring_prefetch_slices, templates/common/slice_ring.cuh); below four stages that
// would leave one slice of prefetch, too little to hide a load from L2, so those rings wait for
// every slice.
SHARDJIT_HOST_DEVICE constexpr int wgmma_slices_in_flight(int stages) { return stages >= 4 ? 1 : 0; }

template <class T, int BM, int BN, int BK, int IN_FLIGHT, MmaOperand A_LAYOUT = MmaOperand::kKContiguous,
          MmaOperand B_LAYOUT = MmaOperand::kKContiguous>
struct WgmmaTileMainloop {
#if !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(BM < 0, "the wgmma main loop needs the sm_90a target (its kernels run only on Hopper)");
#endif
  static_assert(is_same_type<T, bf16>::value || is_same_type<T, fp16>::value,
                "the wgmma main loop takes bf16 or fp16");
  static_assert((BM == 128 || BM == 256) && wgmma_takes_n(BN) && BK == 64,
                "the wgmma main loop runs 128 or 256 x BN tiles, BN as wgmma_takes_n, of 64-wide K slices "
                "(128-byte rows)");
  static_assert(IN_FLIGHT == 0 || IN_FLIGHT == 1, "at most one slice of wgmma is left in flight");
  static constexpr int kThreads = 256;
  static constexpr int kSlicesInFlight = IN_FLIGHT;
  // The kernel fences its cp.async copies into the async proxy before each slice's barrier.
  static constexpr bool kAsyncProxyReads = true;
  static constexpr int kTileRows = BM;
  static constexpr int kTileCols = BN;
  static constexpr int kWarpGroupRows = BM / 2;
  // m64 blocks of rows a warpgroup owns, and the row slots (block, half) a thread holds.
  static constexpr int kMBlocks = BM / 128;
  static constexpr int kRowSlots = 2 * kMBlocks;
  static constexpr int kBlockAccumulators = BN / 2;  // 64 x BN per block, over 128 threads
  static constexpr int kAccumulators = kMBlocks * kBlockAccumulators;
  static constexpr int kColumnGroups = BN / 8;

  float acc[kAccumulators];

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.0f;
  }

  using ATile = WgmmaOperandTile<A_LAYOUT, BM, BK>;
  using BTile = WgmmaOperandTile<B_LAYOUT, BN, BK>;

  // Accumulates one BK slice: a_stage is the stage's A tile, b_stage its B tile, each in its
  // layout ([BM][BK] or [BK][BM]; [BN][BK] or [BK][BN]).
  template <class Between>
  __device__ __forceinline__ void compute(const T* a_stage, const T* b_stage, int warp, int /*lane*/,
                                          Between&& between) {
    const unsigned long long a_desc = ATile::descriptor(a_stage, (warp / 4) * kWarpGroupRows);
    const unsigned long long b_desc = BTile::descriptor(b_stage, 0);
    fence_accumulators();
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
#pragma unroll
      for (int b = 0; b < kMBlocks; ++b) {
        wgmma_m64nNk16<T, BN, ATile::kTranspose, BTile::kTranspose>(
            block_accumulators(b), a_desc + b * ATile::kBlockStep + kk * ATile::kStep, b_desc + kk * BTile::kStep, 1);
      }
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

  // The tile row of the thread's row slot (block slot / 2, half slot % 2; the half alone where
  // kMBlocks is 1).
  __device__ static __forceinline__ int fragment_row(int warp, int lane, int slot) {
    return (warp / 4) * kWarpGroupRows + (slot / 2) * 64 + (warp % 4) * 16 + (lane >> 2) + 8 * (slot % 2);
  }
  // The accumulator of row slot `slot`, column group g and column e < 2.
  __device__ static constexpr int accumulator_index(int slot, int group, int e) {
    return (slot / 2) * kBlockAccumulators + 4 * group + 2 * (slot % 2) + e;
  }
  __device__ static __forceinline__ int fragment_col(int lane, int group, int e) {
    return group * 8 + (lane & 3) * 2 + e;
  }
  // Whether thread (warp, lane) holds any of the tile's first `rows` rows (its first row half
  // is its lower one).
  __device__ static __forceinline__ bool holds_rows(int warp, int lane, int rows) {
    return fragment_row(warp, lane, 0) < rows;
  }
  // Whether warp's warpgroup holds any of the tile's first `rows` rows: the same for its four
  // warps, so a warpgroup that holds none may leave its wgmma out.
  __device__ static __forceinline__ bool warpgroup_holds_rows(int warp, int rows) {
    return (warp / 4) * kWarpGroupRows < rows;
  }

  // Adjacent accumulator pairs a thread holds, and pair i of them (i < kPairs; a compile-time
  // index once the caller's loop is unrolled), as MmaTileMainloop::pair.
  static constexpr int kPairs = kAccumulators / 2;
  // The first column of pair i's column group: pair i's column less its lane's offset (< 8).
  __device__ static constexpr int pair_group_col(int i) { return (i / 2) * 8; }
  __device__ __forceinline__ AccumulatorPair pair(int i, int warp, int lane) const {
    static_assert(kMBlocks == 1, "pairs of a 128-row tile");
    const int g = i / 2;
    const int h = i % 2;
    return {fragment_row(warp, lane, h), fragment_col(lane, g, 0), acc[4 * g + 2 * h], acc[4 * g + 2 * h + 1]};
  }

  // Writes the columns [chunk * COLS, (chunk + 1) * COLS) of the tile to the fp32 tile [BM][ld],
  // whose column 0 is tile column chunk * COLS (as MmaTileMainloop::store_columns). Every warp
  // holds 16 rows of every column, so every warp stores in every chunk.
  template <int COLS>
  __device__ __forceinline__ void store_columns(float* tile, int ld, int chunk, int warp, int lane) const {
    static_assert(kMBlocks == 1 && BN % COLS == 0 && COLS % 8 == 0,
                  "chunks of a 128-row tile hold whole n8 column groups");
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
  // Block b's accumulators as the array wgmma's wrapper takes (b a compile-time index once the
  // caller's loop is unrolled, so they stay in registers).
  __device__ __forceinline__ float (&block_accumulators(int b))[kBlockAccumulators] {
    return *reinterpret_cast<float(*)[kBlockAccumulators]>(acc + b * kBlockAccumulators);
  }

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
