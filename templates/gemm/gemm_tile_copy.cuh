// Shared-memory tiles of the GEMM: a ROWS x COLS block of a row-major matrix (rows strided,
// columns contiguous), stored in 16-byte chunks under an XOR swizzle, and filled by cp.async.
//
// Unlike CpAsyncTile (a K extent fixed at compile time, moving along columns only), the limits
// here are run-time values and a tile may move along either dimension: the GEMM reads dZ both as
// A (K along columns) and as A^T (K along rows), and B (K along rows). Rows at or past the row
// limit and chunks at or past the column limit are zero-filled, so the main loops need no
// masking of their own.
#pragma once

#include "common/ptx.cuh"
#include "common/swizzle.cuh"

namespace shardjit {
namespace kernels {

// Element (row, col) of a swizzled tile of T with COLS columns. Every tile of the GEMM is
// swizzled by swizzled_chunk_any over its row's 16-byte chunks: reading one logical chunk down 8
// consecutive rows (ldmatrix, or the SIMT loop's column reads) lands in 8 different 16-byte
// slots of a 128-byte window, i.e. on different banks.
template <class T, int COLS>
__device__ __forceinline__ const T& gemm_tile_at(const T* tile, int row, int col) {
  constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = COLS / kElemsPerChunk;
  return tile[swizzled_chunk_any<kChunksPerRow>(row, col / kElemsPerChunk) * kElemsPerChunk +
              col % kElemsPerChunk];
}

// The copier of one operand: set to the operand's fixed extent once, then issues one K slice at
// a time. K_ALONG_ROWS: the tile is BK rows of the matrix (B [k][n], A^T [k][m]) and slice k0
// starts at row k0; otherwise it is BK columns (A [m][k]) and starts at column k0. A thread keeps
// one chunk column and walks rows kRowStep apart from one pointer and one row step, so its state
// is a few registers whatever the tile size (the accumulators of a 64 x 64 warp block leave few).
template <class T, int ROWS, int COLS, int THREADS, bool K_ALONG_ROWS>
class GemmTileCopy {
 public:
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static constexpr int kChunksPerRow = COLS / kElemsPerChunk;
  static constexpr int kChunks = ROWS * kChunksPerRow;
  // Small tiles (64 x 16 of a 16-bit type) have fewer chunks than the block has threads.
  static constexpr int kActiveThreads = kChunks < THREADS ? kChunks : THREADS;
  static constexpr int kChunksPerThread = kChunks / kActiveThreads;
  // Chunk i of a thread is its chunk 0 moved down i * kRowStep rows.
  static constexpr int kRowStep = kActiveThreads / kChunksPerRow;
  // The swizzle repeats every 8 rows; where the row step keeps its phase, chunk i's slot is chunk
  // 0's moved down whole rows.
  static constexpr bool kSlotStep = kRowStep % 8 == 0;
  static_assert(COLS % kElemsPerChunk == 0, "a tile row is a whole number of 16-byte chunks");
  static_assert(kChunks % kActiveThreads == 0 && kActiveThreads % kChunksPerRow == 0,
                "chunks split evenly over the threads, a thread keeps one chunk column");
  static_assert(kChunksPerThread <= 32, "row flags are one bit per chunk");

  // Aims at the operand `base` (row stride `stride`): rows [0, row_limit) and columns
  // [0, col_limit) hold data, everything else reads as zeros. The fixed extent of the tile (the
  // block's columns when K_ALONG_ROWS, its rows otherwise) starts at `fixed0`.
  __device__ __forceinline__ void set(const T* base, long long stride, long long fixed0, long long row_limit,
                                      long long col_limit, int tid) {
    active_ = kActiveThreads == THREADS || tid < kActiveThreads;
    row_ = tid / kChunksPerRow;
    chunk_ = tid % kChunksPerRow;
    slot_bytes_ = 16u * static_cast<unsigned int>(swizzled_chunk_any<kChunksPerRow>(row_, chunk_));
    base_ = base;
    step_ = stride * kRowStep;
    const long long col = (K_ALONG_ROWS ? fixed0 : 0) + chunk_ * kElemsPerChunk;
    if constexpr (K_ALONG_ROWS) {
      // Rows move with k0 (issue); the chunk column is fixed.
      stride_ = stride;
      row_limit_ = row_limit;
      inside_ = active_ && col < col_limit ? 1u : 0u;
      src_ = inside_ != 0u ? base + row_ * stride + col : base;
    } else {
      // The columns move with k0 (issue); the rows are fixed.
      col_ = col;
      col_limit_ = col_limit;
      inside_ = 0u;
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        inside_ |= active_ && fixed0 + row_ + i * kRowStep < row_limit ? 1u << i : 0u;
      }
      // Rows grow with i, so when chunk 0's row is outside every row is.
      src_ = (inside_ & 1u) != 0u ? base + (fixed0 + row_) * stride + col : base;
    }
  }

  // Copies K slice [k0, k0 + BK) of the operand to the tile at shared address `dst`.
  __device__ __forceinline__ void issue(unsigned int dst, long long k0) const {
    if (kActiveThreads < THREADS && !active_) return;
    const T* src;
    // Chunk i is copied when i < rows (the others zero-filled).
    int rows;
    if constexpr (K_ALONG_ROWS) {
      src = src_ + k0 * stride_;
      // The whole slice holds data: no predicates. Uniform over the block but in the last
      // column tile, where the chunks past the column limit take the general path.
      if (inside_ != 0u && k0 + ROWS <= row_limit_) {
        copy_whole(dst, src);
        return;
      }
      // Rows of the slice that hold data, counted from the thread's first, in chunks.
      const long long left = row_limit_ - k0 - row_;
      rows = left <= 0      ? 0
             : left >= ROWS ? kChunksPerThread
                            : static_cast<int>((left + kRowStep - 1) / kRowStep);
      rows = inside_ != 0u ? rows : 0;
    } else {
      src = src_ + k0;
      const bool k_inside = k0 + col_ < col_limit_;
      if (k_inside && inside_ == kAllRows) {
        copy_whole(dst, src);
        return;
      }
      rows = k_inside ? kChunksPerThread : 0;
    }
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool copy = i < rows && (K_ALONG_ROWS || (inside_ >> i & 1u) != 0u);
      // A zero-filling copy reads nothing, but its address is still kept valid: the operand's.
      cp_async_cg_16(dst + chunk_slot(i), copy ? src : base_, copy ? 16u : 0u);
      src += step_;
    }
  }

 private:
  static constexpr unsigned int kAllRows = kChunksPerThread == 32 ? 0xffffffffu : (1u << kChunksPerThread) - 1u;

  // Shared address offset of the thread's chunk i.
  __device__ __forceinline__ unsigned int chunk_slot(int i) const {
    return kSlotStep ? slot_bytes_ + 16u * static_cast<unsigned int>(i * kRowStep * kChunksPerRow)
                     : 16u * static_cast<unsigned int>(swizzled_chunk_any<kChunksPerRow>(row_ + i * kRowStep, chunk_));
  }

  // Every chunk of the thread holds data: the bulk of the slices, a 64-bit add and a copy a chunk
  // (the predicated path costs the loop about twice the instructions; docs/perf-notes.md, "GEMM design").
  __device__ __forceinline__ void copy_whole(unsigned int dst, const T* src) const {
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      cp_async_cg_16(dst + chunk_slot(i), src, 16u);
      src += step_;
    }
  }

  const T* base_;
  const T* src_;
  long long step_;
  long long stride_ = 0;
  long long row_limit_ = 0;
  long long col_ = 0;
  long long col_limit_ = 0;
  unsigned int slot_bytes_;
  unsigned int inside_;
  int row_;
  int chunk_;
  bool active_;
};

}  // namespace kernels
}  // namespace shardjit
