// Online log-sum-exp epilogue of the forward's tiles of the rows as N (linear_logp_fwd_rows_as_n,
// fwd_hopper.cuh): wgmma's M is the tile's 128 vocabulary columns and its N the tile's BM rows of
// X, so a thread's accumulators hold two vocabulary columns (fragment rows h = 0, 1) of each of
// its BM / 4 rows of X (fragment columns). Each finished tile is folded into running statistics
// a row of X in the thread's registers; the 64 threads that share a row (eight lanes of each of
// the block's eight warps) are merged once, in store, in a fixed order, so the result does not
// depend on timing.
//
// The statistics are kept in base 2: ref (the largest z log2(e) so far), sum = sum 2^(y - ref)
// and ent = sum 2^(y - ref) (y - ref), y = z log2(e); store turns them into a RowPartial's natural
// units. A row's reference moves only when a tile holds a larger logit, so a term is a multiply, a
// subtraction and one ex2 (the other tiles' fold, fwd_fragment_epilogue.cuh, fuses the first two).
//
// The target's logit: the block's rows' target columns sit in shared memory (init); the one thread
// of the grid that holds a row's target column writes its z there, and store puts it in the
// row's partial.
//
// Shared memory: the targets and target logits of the BM rows (linear_logp_fwd_column_fold_bytes,
// fwd_layout.cuh, after the ring's mbarriers), and for the merge eight warps' statistics of each
// row in the ring's first stage, which no slice needs once the block's tiles are done (a stage
// holds them: linear_logp_fwd_column_fold_merge_bytes), so that the ring can take the stages the
// shared memory leaves room for.
#pragma once

#include "common/math.cuh"
#include "common/ptx_memory.cuh"
#include "common/types.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// The named barrier of the compute warps in init and store (kFwdMergeBarrier's id, 1, is the
// merge's after it).
constexpr unsigned int kColumnFoldBarrier = 2;

template <class BiasT, class TargetT, bool ENTROPY, class Mainloop, int BM>
struct LogpColumnFoldEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static_assert(kGroups * 8 == BM, "the fragment's columns are the tile's rows");
  static constexpr int kRows = 2 * kGroups;  // rows of X a thread holds
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static constexpr int kThreads = 256;

  float ref[kRows];
  float sum[kRows];
  float ent[ENTROPY ? kRows : 1];
  int* target_col;       // [BM] the row's target in shard columns, or -1 (shared memory)
  float* target_logit;   // [BM] its z where this block holds it, else -inf (shared memory)
  float* warp_stats;     // [8][BM][3] (shared memory: the ring's first stage, used in store only)
  int valid_cols;

  // Row j of the thread's rows: fragment column (j / 2, j % 2).
  static __device__ __forceinline__ int row_of(int lane, int j) { return Mainloop::fragment_col(lane, j / 2, j % 2); }

  // smem: the rows' targets (linear_logp_fwd_column_fold_bytes); merge: the ring's first stage.
  __device__ __forceinline__ void init(unsigned char* smem, unsigned char* merge, const void* targets, long long row0,
                                       long long n_rows, long long vocab_start, int valid_local, int tid) {
    valid_cols = valid_local;
    target_col = reinterpret_cast<int*>(smem);
    target_logit = reinterpret_cast<float*>(smem + BM * 4);
    warp_stats = reinterpret_cast<float*>(merge);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      ref[j] = neg_inf();
      sum[j] = 0.0f;
      if constexpr (ENTROPY) ent[j] = 0.0f;
    }
    for (int r = tid; r < BM; r += kThreads) {
      int col = -1;
      if (row0 + r < n_rows) {
        const long long t = static_cast<long long>(static_cast<const TargetT*>(targets)[row0 + r]);
        if (t >= vocab_start && t - vocab_start < valid_local) col = static_cast<int>(t - vocab_start);
      }
      target_col[r] = col;
      target_logit[r] = neg_inf();
    }
    bar_sync(kColumnFoldBarrier, kThreads);
  }

  // Folds the finished tile whose fragment row 0 is shard column n0; columns at or past the valid
  // ones are left out. Rows of X past n_rows are folded too but never stored.
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, const void* bias, float inv_temperature,
                                               int warp, int lane) {
    mainloop.finish();
    const float* const acc = mainloop.acc;
    int col[2];
    bool valid[2];
    float b[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      col[h] = n0 + Mainloop::fragment_row(warp, lane, h);
      valid[h] = col[h] < valid_cols;
      b[h] = 0.0f;
      if constexpr (kBias) b[h] = valid[h] ? to_float(static_cast<const BiasT*>(bias)[col[h]]) : 0.0f;
    }
    // A thread whose two columns are both past the valid ones (the shard's last tile) folds nothing.
    if (!valid[0]) return;
    const float scale = inv_temperature * kLog2e;
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int g = j / 2;
      const int e = j % 2;
      const float a0 = acc[4 * g + e] + b[0];
      const float a1 = acc[4 * g + 2 + e] + b[1];
      const float y0 = a0 * scale;  // column 0 is valid past the return above
      const float y1 = valid[1] ? a1 * scale : neg_inf();
      const float m = fmaxf(y0, y1);
      if (m > ref[j]) {
        // A larger logit: the row's terms so far are rescaled to it (none, on its first tile).
        if (ref[j] != neg_inf()) {
          const float shift = ref[j] - m;
          const float f = exp2_approx(shift);
          if constexpr (ENTROPY) ent[j] = f * (ent[j] + shift * sum[j]);
          sum[j] *= f;
        }
        ref[j] = m;
      }
      const float d0 = y0 - ref[j];
      const float d1 = y1 - ref[j];
      const float p0 = exp2_approx(d0);
      const float p1 = exp2_approx(d1);
      sum[j] += p0 + p1;
      if constexpr (ENTROPY) ent[j] += p0 * d0 + (valid[1] ? p1 * d1 : 0.0f);
      // The target: at most one thread of the grid holds a row's target column.
      const int r = row_of(lane, j);
      const int t = target_col[r];
      if (t == col[0]) target_logit[r] = a0 * inv_temperature;
      if (t == col[1]) target_logit[r] = a1 * inv_temperature;
    }
  }

  // Merges the 64 threads of each row (the eight lanes of a warp by shuffles, then the eight warps
  // through shared memory, in warp order) and writes the rows that exist to out[row0 + r].
  __device__ __forceinline__ void store(RowPartial* out, long long row0, long long n_rows, int tid) const {
    const int warp = tid / 32;
    const int lane = tid % 32;
    // The merge's slots lie in the ring's first stage, which the other warpgroup's last products
    // may still be reading.
    bar_sync(kColumnFoldBarrier, kThreads);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      float r = ref[j];
      float s = sum[j];
      float en = 0.0f;
      if constexpr (ENTROPY) en = ent[j];
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1) {
        merge_stats<ENTROPY, true>(r, s, en, __shfl_xor_sync(0xffffffffu, r, offset),
                                   __shfl_xor_sync(0xffffffffu, s, offset), __shfl_xor_sync(0xffffffffu, en, offset));
      }
      if (lane < 4) {
        float* const slot = warp_stats + (warp * BM + row_of(lane, j)) * 3;
        slot[0] = r;
        slot[1] = s;
        slot[2] = en;
      }
    }
    bar_sync(kColumnFoldBarrier, kThreads);
    for (int row = tid; row < BM; row += kThreads) {
      if (row0 + row >= n_rows) continue;
      float r = neg_inf();
      float s = 0.0f;
      float en = 0.0f;
      for (int w = 0; w < 8; ++w) {
        const float* const slot = warp_stats + (w * BM + row) * 3;
        merge_stats<ENTROPY, true>(r, s, en, slot[0], slot[1], slot[2]);
      }
      // Natural units: max = ref ln 2, ent = sum p (z - max) = ln 2 sum p (y - ref).
      RowPartial p;
      p.max = r == neg_inf() ? neg_inf() : r * kLn2;
      p.sum = s;
      p.ent = ENTROPY ? en * kLn2 : 0.0f;
      p.target = target_logit[row];
      out[row0 + row] = p;
    }
  }

 private:
  static constexpr float kLn2 = 0.6931471805599453f;
};

}  // namespace kernels
}  // namespace shardjit
