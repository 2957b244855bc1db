// Online log-sum-exp epilogue of the forward's tiles of the rows as N (linear_logp_fwd_rows_as_n,
// fwd_hopper.cuh): wgmma's M is the tile's 128 or 256 vocabulary columns and its N the tile's BM
// rows of X, so a thread's accumulators hold two or four vocabulary columns (the mainloop's row
// slots) of each of its BM / 4 rows of X (fragment columns). The 64 threads that share a row
// (eight lanes of each of the block's eight warps) are merged in a fixed order, so the result
// does not depend on timing:
// - 128 columns: each finished tile is folded into running statistics of all the thread's rows
//   in its registers, and the eight lanes are merged once, in store;
// - 256 columns, whose accumulators leave no registers for that: each tile's terms are taken
//   relative to the thread's own largest logit of the row, and the eight lanes' statistics are
//   merged at once, by halves (a reduce-scatter: each shuffle step hands half of the rows to the
//   partner lane, so a row costs three merges, not three per lane), leaving a lane the running
//   statistics of an eighth of the rows.
//
// The statistics are kept in base 2: ref (the largest z log2(e) so far), sum = sum 2^(y - ref)
// and ent = sum 2^(y - ref) (y - ref), y = z log2(e); store turns them into a RowPartial's natural
// units. On 128 columns a row's reference moves only when a tile holds a larger logit; a term is
// one FFMA and one ex2, as in the other tiles' fold (fwd_fragment_epilogue.cuh). Only the shard's
// last tile checks its columns against the valid ones, and a bias is added only where the op has
// one. On 256 columns an empty set's reference is kEmptyRef, finite, so that the merges need no
// tests (an empty set's terms are selected away, never multiplied by an infinite shift).
//
// The target's logit: init lists the block's rows whose target column lies in the block's tiles
// (a handful: a row's target is in one tile of the shard), and each tile looks only at those; the
// one thread of the grid that holds a row's target column writes its z to shared memory, and
// store puts it in the row's partial.
//
// The merge at the block's end: on 128 columns, the eight lanes of a warp that share a row take
// the largest reference among them, scale their sums to it and add them, by shuffles; then (both
// widths) the eight warps' statistics, through the ring's first stage (which no slice needs once
// the block's tiles are done: a stage holds them, linear_logp_fwd_column_fold_merge_bytes), in
// warp order.
//
// Shared memory after the ring's mbarriers (linear_logp_fwd_column_fold_bytes): the target list
// and the BM rows' target logits.
#pragma once

#include "common/math.cuh"
#include "common/ptx_memory.cuh"
#include "common/types.cuh"
#include "linear_logp/bias_read.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// The named barrier of the compute warps in init and store (kFwdMergeBarrier's id, 1, is the
// merge's after it).
constexpr unsigned int kColumnFoldBarrier = 2;

// The thread's columns (the mainloop's row slots: two on 128 columns, four on 256) of the tile
// whose fragment row 0 is shard column n0: the shard column, whether it is a valid one, its bias
// (0 past the valid ones; a forbidden token's -inf read as the floor for inv_temperature,
// bias_read.cuh), and whether every column of the tile is valid (all but the shard's last tile).
// The fold's and the kept chunk's (KeptColumnTiles, fwd_column_keep.cuh).
template <class BiasT, class Mainloop>
struct FwdTileColumns {
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static constexpr int kSlots = Mainloop::kRowSlots;
  int n0;
  int col[kSlots];
  bool valid[kSlots];
  float b[kSlots];
  bool whole;

  __device__ __forceinline__ FwdTileColumns(int tile_n0, int valid_cols, const void* bias, float inv_temperature,
                                            int warp, int lane)
      : n0(tile_n0), whole(tile_n0 + Mainloop::kTileRows <= valid_cols) {
    float bias_min = 0.0f;
    if constexpr (kBias) bias_min = bias_floor(inv_temperature);
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      col[slot] = n0 + Mainloop::fragment_row(warp, lane, slot);
      valid[slot] = col[slot] < valid_cols;
      b[slot] = 0.0f;
      if constexpr (kBias) b[slot] = valid[slot] ? read_bias<BiasT>(bias, col[slot], bias_min) : 0.0f;
    }
  }
};

// What fold_tile calls after each group where nothing is to be done (consume_tile).
struct NoGroupHook {
  __device__ __forceinline__ void operator()(int) const {}
};

template <class BiasT, class TargetT, bool ENTROPY, class Mainloop, int BM>
struct LogpColumnFoldEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static_assert(kGroups * 8 == BM, "the fragment's columns are the tile's rows");
  static_assert(BM <= 256, "a target list entry keeps its row in a byte");
  static constexpr int kRows = 2 * kGroups;  // rows of X a thread holds
  static constexpr int kSlots = Mainloop::kRowSlots;  // vocabulary columns of a row a thread holds
  static constexpr int kTileCols = Mainloop::kTileRows;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static constexpr int kThreads = 256;
  // 256 columns: the lanes merge every tile, a lane keeping rows q kKept + t (t < kKept) of its
  // rows, q = lane / 4; the rows are padded to a multiple of 8 with empty ones for the halving.
  static constexpr bool kLaneMerge = Mainloop::kMBlocks > 1;
  static constexpr int kPaddedRows = (kRows + 7) / 8 * 8;
  static constexpr int kKept = kLaneMerge ? kPaddedRows / 8 : kRows;
  using Columns = FwdTileColumns<BiasT, Mainloop>;

  float ref[kKept];
  float sum[kKept];
  float ent[ENTROPY ? kKept : 1];
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
    for (int j = 0; j < kKept; ++j) {
      ref[j] = kLaneMerge ? kEmptyRef : neg_inf();
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
    fold_tile(mainloop, Columns(n0, valid_cols, bias, inv_temperature, warp, lane), inv_temperature, warp, lane,
              NoGroupHook{});
  }

  // consume_tile for the thread's `columns`, calling after_group(g) on every thread once the rows
  // of fragment column group g are folded (also on a thread whose columns all lie past the valid
  // ones, which folds nothing): the kept chunk's stores (KeptColumnTiles::store_group), so that
  // each group's accumulators die after both uses. On 256 columns, whose merge takes every row at
  // once, after_group(g) comes for every g after it (no kernel keeps in those tiles: fwd_hopper.cuh).
  template <class AfterGroup>
  __device__ __forceinline__ void fold_tile(Mainloop& mainloop, const Columns& columns, float inv_temperature,
                                            int warp, int lane, const AfterGroup& after_group) {
    // Without a hook, a thread whose columns all lie past the valid ones skips the fold whole; with
    // one it goes through it, so that every lane reaches each after_group (warp-wide: store_group).
    constexpr bool kHook = !is_same_type<AfterGroup, NoGroupHook>::value;
    mainloop.finish();
    const float* const acc = mainloop.acc;
    take_targets(acc, columns.n0, columns.b, inv_temperature, warp, lane);
    if constexpr (kLaneMerge) {
      // Every lane takes part in the merge's shuffles, whatever its columns.
      if (columns.whole) {
        fold_merging_lanes<false>(acc, columns.b, inv_temperature, columns.valid, lane);
      } else {
        fold_merging_lanes<true>(acc, columns.b, inv_temperature, columns.valid, lane);
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) after_group(g);
    } else if (columns.whole) {
      fold<false>(acc, columns, inv_temperature, after_group);
    } else if (kHook || columns.valid[0]) {
      fold<true>(acc, columns, inv_temperature, after_group);
    }
  }

  // Merges the 64 threads of each row (the eight lanes of a warp by shuffles, on 256 columns done
  // already, then the eight warps through shared memory, in warp order) and writes the rows that
  // exist to out[row0 + r].
  __device__ __forceinline__ void store(RowPartial* out, long long row0, long long n_rows, int tid) const {
    const int warp = tid / 32;
    const int lane = tid % 32;
    // The merge's slots lie in the ring's first stage, which the other warpgroup's last products
    // may still be reading.
    bar_sync(kColumnFoldBarrier, kThreads);
    if constexpr (kLaneMerge) {
      // The lanes' statistics are merged already: each lane writes the rows it keeps.
#pragma unroll
      for (int t = 0; t < kKept; ++t) {
        const int j = (lane >> 2) * kKept + t;
        if (j >= kRows) continue;
        float* const slot = warp_stats + (warp * BM + row_of(lane, j)) * 3;
        slot[0] = ref[t] == kEmptyRef ? neg_inf() : ref[t];
        slot[1] = sum[t];
        slot[2] = ENTROPY ? ent[t] : 0.0f;
      }
    } else {
      write_lane_merged_stats(warp, lane);
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
  // The reference of an empty set on 256 columns: far below any logit in base-2 units, yet finite,
  // so that two empty sets merge to an empty one (2^0 x 0) and a set merged into one with logits
  // scales by 2^-1e30 = 0.
  static constexpr float kEmptyRef = -1.0e30f;

  // The kept-rows fold's lane merge (128 columns), in store: for each of the thread's rows the
  // eight lanes' largest reference, each lane's sums scaled to it, then added; the lanes of
  // q = lane / 4 = 0 write the warp's statistics.
  __device__ __forceinline__ void write_lane_merged_stats(int warp, int lane) const {
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      float r = ref[j];
#pragma unroll
      for (int offset = 4; offset < 32; offset <<= 1) r = fmaxf(r, __shfl_xor_sync(0xffffffffu, r, offset));
      float s = 0.0f;
      float en = 0.0f;
      if (ref[j] != neg_inf()) {
        s = sum[j];
        if constexpr (ENTROPY) en = ent[j];
        rescale(ref[j], s, en, r);
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
  }

  // Folds the tile's terms (128 columns): MASKED (the shard's last tile) leaves out the thread's
  // columns past the valid ones (none where its first is one of them).
  template <bool MASKED, class AfterGroup>
  __device__ __forceinline__ void fold(const float* acc, const Columns& columns, float inv_temperature,
                                       const AfterGroup& after_group) {
    const float scale = inv_temperature * kLog2e;
    const bool valid1 = columns.valid[1];
#pragma unroll
    for (int j = 0; j < kRows; ++j) {
      const int g = j / 2;
      const int e = j % 2;
      if (!MASKED || columns.valid[0]) {
        fold_row<MASKED>(j, acc[Mainloop::accumulator_index(0, g, e)], acc[Mainloop::accumulator_index(1, g, e)],
                         columns.b, scale, valid1);
      }
      if (e == 1) after_group(g);
    }
  }

  // Folds row j's two terms, the accumulators a0 and a1 of the thread's two columns.
  template <bool MASKED>
  __device__ __forceinline__ void fold_row(int j, float a0, float a1, const float (&b)[kSlots], float scale,
                                           bool valid1) {
    if constexpr (kBias) {
      a0 += b[0];
      a1 += b[1];
    }
    // scale > 0 keeps the order, so the larger y is the larger accumulator's.
    const float m = (MASKED && !valid1 ? a0 : fmaxf(a0, a1)) * scale;
    if (m > ref[j]) {
      // A larger logit: the row's terms so far are rescaled to it (none, on its first tile).
      if (ref[j] != neg_inf()) rescale(ref[j], sum[j], ent[ENTROPY ? j : 0], m);
      ref[j] = m;
    }
    const float d0 = fmaf(a0, scale, -ref[j]);
    const float d1 = fmaf(a1, scale, -ref[j]);
    const float p0 = exp2_approx(d0);
    const float p1 = MASKED && !valid1 ? 0.0f : exp2_approx(d1);
    sum[j] += p0 + p1;
    if constexpr (ENTROPY) ent[j] += p0 * d0 + p1 * d1;
  }

  // Scales (sum, ent), relative to ref, to the reference to >= ref: 2^(ref - to) sum, and
  // sum 2^(y - to) (y - to) = 2^(ref - to) (ent + (ref - to) sum).
  static __device__ __forceinline__ void rescale(float ref, float& sum, float& ent, float to) {
    const float shift = ref - to;
    const float f = exp2_approx(shift);
    if constexpr (ENTROPY) ent = f * (ent + shift * sum);
    sum *= f;
  }

  // Merges (m2, s2, e2) into (m, s, e), both finite references (kEmptyRef for an empty set): the
  // smaller's statistics are scaled to the larger reference, one ex2.
  static __device__ __forceinline__ void merge_finite(float& m, float& s, float& e, float m2, float s2, float e2) {
    const bool first_larger = m >= m2;
    const float shift = -fabsf(m - m2);
    const float f = exp2_approx(shift);
    const float s_large = first_larger ? s : s2;
    const float s_small = first_larger ? s2 : s;
    if constexpr (ENTROPY) {
      const float e_large = first_larger ? e : e2;
      const float e_small = first_larger ? e2 : e;
      e = fmaf(f, fmaf(shift, s_small, e_small), e_large);
    }
    s = fmaf(f, s_small, s_large);
    m = fmaxf(m, m2);
  }

  // One halving of the lanes' merge: of the thread's n row statistics, the lane whose bit OFFSET
  // is set keeps the upper half and hands the lower to its partner (lane ^ OFFSET), the other the
  // reverse; each merges what it keeps with what it is handed, into its first n / 2.
  template <int N, int OFFSET>
  static __device__ __forceinline__ void halve(float (&m)[kPaddedRows], float (&s)[kPaddedRows],
                                               float (&e)[ENTROPY ? kPaddedRows : 1], int lane) {
    const bool upper = (lane & OFFSET) != 0;
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const int kept = N / 2 + i;
      const float m_keep = upper ? m[kept] : m[i];
      const float s_keep = upper ? s[kept] : s[i];
      const float m_in = __shfl_xor_sync(0xffffffffu, upper ? m[i] : m[kept], OFFSET);
      const float s_in = __shfl_xor_sync(0xffffffffu, upper ? s[i] : s[kept], OFFSET);
      float e_keep = 0.0f;
      float e_in = 0.0f;
      if constexpr (ENTROPY) {
        e_keep = upper ? e[kept] : e[i];
        e_in = __shfl_xor_sync(0xffffffffu, upper ? e[i] : e[kept], OFFSET);
      }
      m[i] = m_keep;
      s[i] = s_keep;
      merge_finite(m[i], s[i], e_keep, m_in, s_in, e_in);
      if constexpr (ENTROPY) e[i] = e_keep;
    }
  }

  // The 256-column fold: the tile's statistics of each of the thread's rows relative to its own
  // largest logit there, the eight lanes' merged by three halvings (lanes q = lane / 4 apart by 4,
  // 2 and 1: shuffle offsets 16, 8, 4), then each of the lane's kKept into its running
  // statistics. MASKED (the shard's last tile) leaves out the columns past the valid ones.
  template <bool MASKED>
  __device__ __forceinline__ void fold_merging_lanes(const float* acc, const float (&b)[kSlots],
                                                     float inv_temperature, const bool (&valid)[kSlots], int lane) {
    const float scale = inv_temperature * kLog2e;
    float m[kPaddedRows];
    float s[kPaddedRows];
    float e[ENTROPY ? kPaddedRows : 1];
#pragma unroll
    for (int j = 0; j < kPaddedRows; ++j) {
      m[j] = kEmptyRef;
      s[j] = 0.0f;
      if constexpr (ENTROPY) e[j] = 0.0f;
      if (j >= kRows) continue;
      float a[kSlots];
      float top = -3.0e38f;
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        a[slot] = acc[Mainloop::accumulator_index(slot, j / 2, j % 2)];
        if constexpr (kBias) a[slot] += b[slot];
        top = fmaxf(top, MASKED && !valid[slot] ? -3.0e38f : a[slot]);
      }
      // scale > 0 keeps the order; a thread with no valid column keeps the empty set.
      m[j] = MASKED ? fmaxf(top * scale, kEmptyRef) : top * scale;
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        const float d = fmaf(a[slot], scale, -m[j]);
        const float p = MASKED && !valid[slot] ? 0.0f : exp2_approx(d);
        s[j] += p;
        if constexpr (ENTROPY) e[j] = fmaf(p, d, e[j]);
      }
    }
    halve<kPaddedRows, 16>(m, s, e, lane);
    halve<kPaddedRows / 2, 8>(m, s, e, lane);
    halve<kPaddedRows / 4, 4>(m, s, e, lane);
#pragma unroll
    for (int t = 0; t < kKept; ++t) {
      merge_finite(ref[t], sum[t], ent[ENTROPY ? t : 0], m[t], s[t], ENTROPY ? e[t] : 0.0f);
    }
  }

  // Writes the target logits this thread holds in the tile at shard column n0: the list's entries
  // of the tile's columns, each held by one thread, whose accumulator is picked by a compile-time
  // index (a runtime one would put acc in local memory).
  __device__ __forceinline__ void take_targets(const float* acc, int n0, const float (&b)[kSlots],
                                               float inv_temperature, int warp, int lane) const {
    const int count = *target_count;
    for (int i = 0; i < count; ++i) {
      const int c = target_cols[i] - n0;
      const int r = target_rows[i];
      if (c < 0 || c >= kTileCols) continue;
      // The row slot of tile column c: its m64 block in the warpgroup's rows, and its half.
      const int slot = 2 * ((c % Mainloop::kWarpGroupRows) >> 6) + ((c >> 3) & 1);
      if (Mainloop::fragment_row(warp, lane, slot) != c || Mainloop::fragment_col(lane, r >> 3, r & 1) != r) continue;
      const int index = Mainloop::accumulator_index(slot, r >> 3, r & 1);
      float a = 0.0f;
      float bias = 0.0f;
#pragma unroll
      for (int k = 0; k < Mainloop::kAccumulators; ++k) {
        if (k == index) a = acc[k];
      }
#pragma unroll
      for (int k = 0; k < kSlots; ++k) {
        if (k == slot) bias = b[k];
      }
      target_logit[r] = (a + bias) * inv_temperature;
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
