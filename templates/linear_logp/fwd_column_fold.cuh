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
// units. A row's reference moves only when a tile holds a larger logit; a term is one FFMA and one
// ex2, as in the other tiles' fold (fwd_fragment_epilogue.cuh). Only the shard's last tile checks
// its columns against the valid ones, and only a bias is added.
//
// The target's logit: init lists the block's rows whose target column lies in the block's tiles
// (a handful: a row's target is in one tile of the shard), and each tile looks only at those; the
// one thread of the grid that holds a row's target column writes its z to shared memory, and
// store puts it in the row's partial.
//
// The merge: the eight lanes of a warp that share a row take the largest reference among them,
// scale their sums to it and add them, by shuffles; then the eight warps' statistics, through the
// ring's first stage (which no slice needs once the block's tiles are done: a stage holds them,
// linear_logp_fwd_column_fold_merge_bytes), in warp order.
//
// Shared memory after the ring's mbarriers (linear_logp_fwd_column_fold_bytes): the target list
// and the BM rows' target logits.
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

// The thread's two columns (fragment rows h) of the tile whose fragment row 0 is shard column n0:
// the shard column, whether it is a valid one, its bias (0 past the valid ones), and whether every
// column of the tile is valid (all but the shard's last tile). The fold's and the kept chunk's
// (KeptColumnTiles, fwd_column_keep.cuh).
template <class BiasT, class Mainloop>
struct FwdTileColumns {
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  int n0;
  int col[2];
  bool valid[2];
  float b[2];
  bool whole;

  __device__ __forceinline__ FwdTileColumns(int tile_n0, int valid_cols, const void* bias, int warp, int lane)
      : n0(tile_n0), whole(tile_n0 + Mainloop::kTileRows <= valid_cols) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      col[h] = n0 + Mainloop::fragment_row(warp, lane, h);
      valid[h] = col[h] < valid_cols;
      b[h] = 0.0f;
      if constexpr (kBias) b[h] = valid[h] ? to_float(static_cast<const BiasT*>(bias)[col[h]]) : 0.0f;
    }
  }
};

template <class BiasT, class TargetT, bool ENTROPY, class Mainloop, int BM>
struct LogpColumnFoldEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static_assert(kGroups * 8 == BM, "the fragment's columns are the tile's rows");
  static_assert(BM <= 256, "a target list entry keeps its row in a byte");
  static constexpr int kRows = 2 * kGroups;  // rows of X a thread holds
  static constexpr int kTileCols = Mainloop::kTileRows;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static constexpr int kThreads = 256;
  using Columns = FwdTileColumns<BiasT, Mainloop>;

  float ref[kRows];
  float sum[kRows];
  float ent[ENTROPY ? kRows : 1];
  // Shared memory: the list of the rows whose target column the block's tiles hold (its length,
  // each entry's shard column and row), and each row's target z where this block holds it, else -inf.
  int* target_count;
  int* target_cols;            // [BM]
  unsigned char* target_rows;  // [BM]
  float* target_logit;         // [BM]
  float* warp_stats;           // [8][BM][3] (the ring's first stage, used in store only)
  int valid_cols;

  // Row j of the thread's rows: fragment column (j / 2, j % 2).
  static __device__ __forceinline__ int row_of(int lane, int j) { return Mainloop::fragment_col(lane, j / 2, j % 2); }

  // smem: the target list (linear_logp_fwd_column_fold_bytes); merge: the ring's first stage. The
  // block's tiles hold the shard columns [col_begin, col_end).
  __device__ __forceinline__ void init(unsigned char* smem, unsigned char* merge, const void* targets_in,
                                       long long row0, long long n_rows, long long vocab_start, int valid_local,
                                       int col_begin, int col_end, int tid) {
    valid_cols = valid_local;
    target_count = reinterpret_cast<int*>(smem);
    target_logit = reinterpret_cast<float*>(smem + 16);
    target_cols = reinterpret_cast<int*>(smem + 16 + BM * 4);
    target_rows = smem + 16 + BM * 8;
    warp_stats = reinterpret_cast<float*>(merge);
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      ref[j] = neg_inf();
      sum[j] = 0.0f;
      if constexpr (ENTROPY) ent[j] = 0.0f;
    }
    if (tid == 0) *target_count = 0;
    bar_sync(kColumnFoldBarrier, kThreads);
    // The list's order depends on timing; each entry is looked at alone, so the results do not.
    for (int r = tid; r < BM; r += kThreads) {
      target_logit[r] = neg_inf();
      if (row0 + r >= n_rows) continue;
      const long long t = static_cast<long long>(static_cast<const TargetT*>(targets_in)[row0 + r]) - vocab_start;
      if (t >= col_begin && t < col_end && t < valid_local) {
        const int i = atomicAdd(target_count, 1);
        target_cols[i] = static_cast<int>(t);
        target_rows[i] = static_cast<unsigned char>(r);
      }
    }
    bar_sync(kColumnFoldBarrier, kThreads);
  }

  // Folds the finished tile whose fragment row 0 is shard column n0; columns at or past the valid
  // ones are left out. Rows of X past n_rows are folded too but never stored.
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, const void* bias, float inv_temperature,
                                               int warp, int lane) {
    fold_tile(mainloop, Columns(n0, valid_cols, bias, warp, lane), inv_temperature, warp, lane, [](int) {});
  }

  // consume_tile for the thread's `columns`, calling after_group(g) on every thread once the rows
  // of fragment column group g are folded (also on a thread whose columns all lie past the valid
  // ones, which folds nothing): the kept chunk's stores (KeptColumnTiles::store_group), so that
  // each group's accumulators die after both uses.
  template <class AfterGroup>
  __device__ __forceinline__ void fold_tile(Mainloop& mainloop, const Columns& columns, float inv_temperature,
                                            int warp, int lane, AfterGroup&& after_group) {
    mainloop.finish();
    take_targets(mainloop.acc, columns.n0, columns.b, inv_temperature, warp, lane);
    if (columns.whole) {
      fold<false>(mainloop.acc, columns, inv_temperature, after_group);
    } else {
      fold<true>(mainloop.acc, columns, inv_temperature, after_group);
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
      // The eight lanes' largest reference, each lane's sums scaled to it, then added.
      float r = ref[j];
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1) r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, offset));
      float s = 0.0f;
      float en = 0.0f;
      if (ref[j] != neg_inf()) {
        const float shift = ref[j] - r;
        const float f = exp2_approx(shift);
        s = sum[j] * f;
        if constexpr (ENTROPY) en = f * (ent[j] + shift * sum[j]);
      }
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, offset);
        if constexpr (ENTROPY) en += __shfl_xor_sync(0xffffffffu, en, offset);
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

  // Folds the tile's terms: MASKED (the shard's last tile) leaves out the thread's columns past
  // the valid ones (none where its first is one of them).
  template <bool MASKED, class AfterGroup>
  __device__ __forceinline__ void fold(const float* acc, const Columns& columns, float inv_temperature,
                                       AfterGroup&& after_group) {
    const float scale = inv_temperature * kLog2e;
    const bool valid1 = columns.valid[1];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int g = j / 2;
      const int e = j % 2;
      if (!MASKED || columns.valid[0]) {
        fold_row<MASKED>(j, acc[4 * g + e], acc[4 * g + 2 + e], columns.b, scale, valid1);
      }
      if (e == 1) after_group(g);
    }
  }

  // Folds row j's two terms, the accumulators a0 and a1 of the thread's two columns.
  template <bool MASKED>
  __device__ __forceinline__ void fold_row(int j, float a0, float a1, const float (&b)[2], float scale, bool valid1) {
    if constexpr (kBias) {
      a0 += b[0];
      a1 += b[1];
    }
    // scale > 0 keeps the order, so the larger y is the larger accumulator's.
    const float m = (MASKED && !valid1 ? a0 : fmaxf(a0, a1)) * scale;
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
    const float d0 = fmaf(a0, scale, -ref[j]);
    const float d1 = fmaf(a1, scale, -ref[j]);
    const float p0 = exp2_approx(d0);
    const float p1 = MASKED && !valid1 ? 0.0f : exp2_approx(d1);
    sum[j] += p0 + p1;
    if constexpr (ENTROPY) ent[j] += p0 * d0 + p1 * d1;
  }

  // Writes the target logits this thread holds in the tile at shard column n0: the list's entries
  // of the tile's columns, each held by one thread, whose accumulator is picked by a compile-time
  // index (a runtime one would put acc in local memory).
  __device__ __forceinline__ void take_targets(const float* acc, int n0, const float (&b)[2], float inv_temperature,
                                               int warp, int lane) const {
    const int count = *target_count;
    for (int i = 0; i < count; ++i) {
      const int c = target_cols[i] - n0;
      const int r = target_rows[i];
      if (c < 0 || c >= kTileCols) continue;
      const int h = (c >> 3) & 1;
      if (Mainloop::fragment_row(warp, lane, h) != c || Mainloop::fragment_col(lane, r >> 3, r & 1) != r) continue;
      const int index = 4 * (r >> 3) + 2 * h + (r & 1);
      float a = 0.0f;
#pragma unroll
      for (int k = 0; k < Mainloop::kAccumulators; ++k) {
        if (k == index) a = acc[k];
      }
      target_logit[r] = (a + (h != 0 ? b[1] : b[0])) * inv_temperature;
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
