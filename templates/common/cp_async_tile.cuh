// Asynchronous copy of a ROWS x BK tile of a row-major, K-contiguous matrix into a swizzled
// shared-memory tile, all threads of the block sharing the 16-byte chunks. Rows past row_limit
// and chunks past KDIM are zero-filled, so a GEMM over the tile needs no masking of its own.
//
// The copier is set to a row range once and then issues one K slice at a time: in a K loop the
// only thing that changes is the column offset, so the 64-bit row addressing is kept out of it.
// PRIORITY is the L2 priority of the lines the copies bring in: kEvictFirst for an operand that
// is streamed (read by the blocks that share it at about the same time, then not again for
// long), so that it does not push the reused operand out of L2.
#pragma once

#include "common/ptx.cuh"
#include "common/swizzle.cuh"

namespace shardjit {
namespace kernels {

template <class T, int ROWS, int BK, int KDIM, int THREADS, L2Priority PRIORITY = L2Priority::kNormal>
class CpAsyncTile {
 public:
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static constexpr int kChunksPerRow = BK / kElemsPerChunk;
  static constexpr int kChunksPerThread = ROWS * kChunksPerRow / THREADS;
  // Chunk i of a thread is its chunk 0 moved down by i * kRowStep rows.
  static constexpr int kRowStep = THREADS / kChunksPerRow;
  static_assert(BK % kElemsPerChunk == 0, "BK must be a whole number of 16-byte chunks");
  static_assert(ROWS * kChunksPerRow % THREADS == 0, "tile chunks must split evenly over threads");
  static_assert(THREADS % kChunksPerRow == 0, "a thread keeps one chunk column");
  // The swizzle repeats every 8 rows, so every chunk of a thread has the slot of its chunk 0
  // moved down by whole rows.
  static_assert(kRowStep % 8 == 0, "row step must keep the swizzle phase");
  // KDIM is a multiple of 8 elements, so each 16-byte chunk lies wholly inside or outside it.
  static_assert(KDIM % kElemsPerChunk == 0, "K must be a whole number of 16-byte chunks");
  static_assert(kChunksPerThread <= 32, "row flags are one bit per chunk");
  static constexpr bool kKTail = KDIM % BK != 0;

  // Aims at rows [first_row, first_row + ROWS) of `base` (row stride `stride` elements).
  __device__ __forceinline__ void set_rows(const T* base, long long stride, long long first_row,
                                           long long row_limit, int tid) {
    const int row = tid / kChunksPerRow;
    column_ = (tid % kChunksPerRow) * kElemsPerChunk;
    slot_bytes_ = 16u * static_cast<unsigned int>(
                            swizzled_chunk<kChunksPerRow>(row, tid % kChunksPerRow));
    rows_inside_ = 0u;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const long long grow = first_row + row + i * kRowStep;
      const bool inside = grow < row_limit;
      // A zero-filling copy reads nothing, but its address is still kept valid.
      src_[i] = inside ? base + grow * stride + column_ : base;
      rows_inside_ |= inside ? 1u << i : 0u;
    }
  }

  // Copies columns [k0, k0 + BK) of the rows to the tile at shared address `dst`.
  __device__ __forceinline__ void issue(unsigned int dst, int k0) const {
    const bool k_inside = !kKTail || k0 + column_ < KDIM;
    const unsigned long long policy = l2_policy<PRIORITY>();
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool inside = k_inside && (rows_inside_ >> i & 1u) != 0u;
      const unsigned int slot = slot_bytes_ + 16u * (i * kRowStep * kChunksPerRow);
      cp_async_cg_16_with<PRIORITY>(dst + slot, inside ? src_[i] + k0 : src_[i], inside ? 16u : 0u, policy);
    }
  }

 private:
  const T* src_[kChunksPerThread];
  unsigned int slot_bytes_;
  unsigned int rows_inside_;
  int column_;
};

// CpAsyncTile with the thread's rows addressed from one pointer and one row step instead of a
// pointer per chunk: 7 registers of state whatever the tile height, against 2 per chunk plus 3
// (19 for a 256-row bf16 tile of BK = 64). For kernels whose accumulators leave few registers.
// A slice costs two integer instructions a chunk for the address (a 64-bit add of the step)
// and, for a tile with rows past the limit or a K tail, a predicate; the whole-tile case, by far
// the most common, skips the predicates behind one branch (threads differ only in edge tiles). (Recomputing each chunk's
// address from the stride, as this copier first did, took ~8 instructions a chunk and made the
// Hopper main loop issue-bound: docs/perf-notes.md, "Portable forward".)
template <class T, int ROWS, int BK, int KDIM, int THREADS, L2Priority PRIORITY = L2Priority::kNormal>
class CpAsyncTileStrided {
 public:
  using Layout = CpAsyncTile<T, ROWS, BK, KDIM, THREADS>;
  static constexpr int kElemsPerChunk = Layout::kElemsPerChunk;
  static constexpr int kChunksPerRow = Layout::kChunksPerRow;
  static constexpr int kChunksPerThread = Layout::kChunksPerThread;
  static constexpr int kRowStep = Layout::kRowStep;
  static constexpr bool kKTail = Layout::kKTail;
  static constexpr unsigned int kAllRows =
      kChunksPerThread == 32 ? 0xffffffffu : (1u << kChunksPerThread) - 1u;

  // Aims at rows [first_row, first_row + ROWS) of `base` (row stride `stride` elements).
  __device__ __forceinline__ void set_rows(const T* base, long long stride, long long first_row,
                                           long long row_limit, int tid) {
    const int row = tid / kChunksPerRow;
    column_ = (tid % kChunksPerRow) * kElemsPerChunk;
    slot_bytes_ = 16u * static_cast<unsigned int>(
                            swizzled_chunk<kChunksPerRow>(row, tid % kChunksPerRow));
    rows_inside_ = 0u;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      rows_inside_ |= first_row + row + i * kRowStep < row_limit ? 1u << i : 0u;
    }
    // Rows grow with i, so when chunk 0's row is outside every row is, and the base (valid) is
    // the address of all the zero-filling copies.
    src_ = reinterpret_cast<const char*>((rows_inside_ & 1u) != 0u ? base + (first_row + row) * stride + column_
                                                                    : base);
    step_bytes_ = stride * kRowStep * static_cast<long long>(sizeof(T));
  }

  // Copies columns [k0, k0 + BK) of the rows to the tile at shared address `dst`.
  __device__ __forceinline__ void issue(unsigned int dst, int k0) const {
    const char* src = src_ + static_cast<long long>(k0) * static_cast<long long>(sizeof(T));
    const unsigned long long policy = l2_policy<PRIORITY>();  // once a slice, not once a copy
    const bool whole = rows_inside_ == kAllRows && (!kKTail || k0 + BK <= KDIM);
    if (whole) {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        cp_async_cg_16_with<PRIORITY>(dst + chunk_slot(i), src, 16u, policy);
        src += step_bytes_;
      }
      return;
    }
    const bool k_inside = !kKTail || k0 + column_ < KDIM;
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool inside = k_inside && (rows_inside_ >> i & 1u) != 0u;
      // A zero-filling copy reads nothing, but its address is still kept valid: chunk 0's (the
      // matrix base when chunk 0's row is outside too).
      cp_async_cg_16_with<PRIORITY>(dst + chunk_slot(i), inside ? src : src_, inside ? 16u : 0u, policy);
      src += step_bytes_;
    }
  }

 private:
  __device__ __forceinline__ unsigned int chunk_slot(int i) const {
    return slot_bytes_ + 16u * static_cast<unsigned int>(i * kRowStep * kChunksPerRow);
  }

  const char* src_;
  long long step_bytes_;
  unsigned int slot_bytes_;
  unsigned int rows_inside_;
  int column_;
};

// The copier of a ROWS x BK tile: CpAsyncTileStrided where the kernel's accumulators leave no
// registers for a pointer per chunk (STRIDED), CpAsyncTile otherwise.
template <class T, int ROWS, int BK, int KDIM, int THREADS, bool STRIDED,
          L2Priority PRIORITY = L2Priority::kNormal>
struct CpAsyncTileFor {
  using type = CpAsyncTile<T, ROWS, BK, KDIM, THREADS, PRIORITY>;
};

template <class T, int ROWS, int BK, int KDIM, int THREADS, L2Priority PRIORITY>
struct CpAsyncTileFor<T, ROWS, BK, KDIM, THREADS, true, PRIORITY> {
  using type = CpAsyncTileStrided<T, ROWS, BK, KDIM, THREADS, PRIORITY>;
};

}  // namespace kernels
}  // namespace shardjit
