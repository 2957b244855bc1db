// Online log-sum-exp epilogue of linear_logp_fwd_hopper (fwd_hopper.cuh): each finished
// vocabulary tile is folded straight from the wgmma accumulators, which hold two rows and
// BN / 4 columns a thread (WgmmaTileMainloop's fragment layout), into running statistics kept
// in the thread's registers. No shared-memory logit tile and no barrier: the shared memory is
// all the ring's, and a warp starts its epilogue as soon as its own products are done.
//
// The four lanes that share a row each keep the statistics of their own columns across the
// split's tiles; they are merged once, in store, in a fixed lane order, so the result does not
// depend on timing. Like LogpEpilogue (fwd_epilogue.cuh) it has init, consume_tile and store,
// but takes the shard's valid columns at run time (init), so that the kernel is built once for
// every shape; the edge tile's fold is then compiled beside the whole tiles', as it was in the
// kernels specialized for a vocabulary with an edge tile, whose whole tiles ran as fast as those
// of the kernels without one (docs/perf-notes-jit.md, items 5 and 8).
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/fragment_bias.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, bool ENTROPY, class Mainloop>
struct LogpFragmentEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static constexpr int kCols = kGroups * 8;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;

  RowPartial run[2];  // the thread's two rows, over its columns so far
  int target_col[2];  // the row's target in shard columns, or -1 (see LogpEpilogue::init)
  int valid_cols;     // the shard's columns with logits (V_VALID)

  // The shard's first valid_local columns have logits; the rest are padding.
  __device__ __forceinline__ void init(const void* targets, long long row0, long long n_rows,
                                       long long vocab_start, int valid_local, int tid) {
    valid_cols = valid_local;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      run[h] = empty_partial();
      target_col[h] = -1;
      const long long row = row0 + Mainloop::fragment_row(tid / 32, tid % 32, h);
      if (row < n_rows) {
        const long long t = static_cast<long long>(static_cast<const TargetT*>(targets)[row]);
        if (t >= vocab_start && t - vocab_start < valid_local) target_col[h] = static_cast<int>(t - vocab_start);
      }
    }
  }

  // Folds the finished tile whose column 0 is shard column n0. z = (acc + bias) * inv_temperature;
  // columns at or past the valid ones are excluded. Rows past n_rows (X zero-filled, or stale
  // shared memory past a short box: fwd_hopper.cuh) are folded too but never stored.
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, const void* bias, float inv_temperature,
                                               int lane) {
    mainloop.finish();
    float* const acc = mainloop.acc;
    const int limit = valid_cols - n0;
    if constexpr (kBias) add_fragment_bias<BiasT, Mainloop>(acc, 0, kGroups, n0, limit, bias, inv_temperature, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (limit >= kCols) {
        fold_whole_row(acc, h, n0, inv_temperature, lane);
      } else {
        fold_partial_row(acc, h, n0, limit, inv_temperature, lane);
      }
    }
  }

  // Merges the four lanes of each row (xor 1, then xor 2: every lane ends with the same bits)
  // and writes the rows that exist.
  __device__ __forceinline__ void store(RowPartial* out, long long row0, long long n_rows, int tid) const {
    const int lane = tid % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      RowPartial r = run[h];
#pragma unroll
      for (int offset = 1; offset < 4; offset <<= 1) {
        const float max = __shfl_xor_sync(0xffffffffu, r.max, offset);
        const float sum = __shfl_xor_sync(0xffffffffu, r.sum, offset);
        const float ent = __shfl_xor_sync(0xffffffffu, r.ent, offset);
        const float target = __shfl_xor_sync(0xffffffffu, r.target, offset);
        merge_stats<ENTROPY>(r, max, sum, ent);
        r.target = fmaxf(r.target, target);
      }
      const long long row = row0 + Mainloop::fragment_row(tid / 32, lane, h);
      if ((lane & 3) == 0 && row < n_rows) out[row] = r;
    }
  }

 private:
  // The row's target logit where this thread holds the target's column, else -inf. Called once
  // a row and tile; the column loop runs only in the tile that holds the target.
  __device__ __forceinline__ float target_logit(const float* acc, int h, int n0, float inv_temperature,
                                                int lane) const {
    const int tcol = target_col[h] - n0;
    float target = neg_inf();
    if (tcol >= 0 && tcol < kGroups * 8) {
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (Mainloop::fragment_col(lane, g, e) == tcol) target = acc[4 * g + 2 * h + e] * inv_temperature;
        }
    }
    return target;
  }

  // A tile whose columns are all valid. The max is taken of the raw accumulators and scaled once
  // (inv_temperature > 0 keeps the order, and rounding is monotone, so the target's z never
  // exceeds it); each term is then one FFMA and one ex2:
  // exp(z - max) = 2^((acc - acc_max) * inv_temperature * log2(e)). The max's own term comes out
  // within a rounding of 1 rather than exactly 1; logp_combine keeps logp <= 0 regardless.
  __device__ __forceinline__ void fold_whole_row(const float* acc, int h, int n0, float inv_temperature,
                                                 int lane) {
    float acc_max = acc[2 * h];
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) acc_max = fmaxf(acc_max, acc[4 * g + 2 * h + e]);
    const float tile_max = acc_max * inv_temperature;
    const float scale = inv_temperature * kLog2e;
    const float offset = -acc_max * scale;
    float sum = 0.0f;
    float ent = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float a = acc[4 * g + 2 * h + e];
        const float p = exp2_approx(fmaf(a, scale, offset));
        sum += p;
        if (ENTROPY) ent += p * fmaf(a, inv_temperature, -tile_max);
      }
    merge_stats<ENTROPY>(run[h], tile_max, sum, ent);
    run[h].target = fmaxf(run[h].target, target_logit(acc, h, n0, inv_temperature, lane));
  }

  // The shard's last tile, with columns past the valid ones (limit = valid_cols - n0 < BN): those are
  // left out, and a thread may hold none of the valid ones (its max stays -inf and its sum 0).
  // The terms are the whole tile's (one FFMA and one ex2 a logit): expf's accurate path here was
  // half the forward kernel's compile time.
  __device__ __forceinline__ void fold_partial_row(const float* acc, int h, int n0, int limit,
                                                   float inv_temperature, int lane) {
    float acc_max = neg_inf();
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (Mainloop::fragment_col(lane, g, e) < limit) acc_max = fmaxf(acc_max, acc[4 * g + 2 * h + e]);
      }
    const float tile_max = acc_max * inv_temperature;
    const float scale = inv_temperature * kLog2e;
    const float offset = -acc_max * scale;
    float sum = 0.0f;
    float ent = 0.0f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (Mainloop::fragment_col(lane, g, e) < limit) {
          const float a = acc[4 * g + 2 * h + e];
          const float p = exp2_approx(fmaf(a, scale, offset));
          sum += p;
          if (ENTROPY) ent += p * fmaf(a, inv_temperature, -tile_max);
        }
      }
    merge_stats<ENTROPY>(run[h], tile_max, sum, ent);
    run[h].target = fmaxf(run[h].target, target_logit(acc, h, n0, inv_temperature, lane));
  }
};

}  // namespace kernels
}  // namespace shardjit
