// Online log-sum-exp epilogue of linear_logp_fwd on the Hopper main loop: each finished
// vocabulary tile is folded straight from the wgmma accumulators, which hold two rows and
// BN / 4 columns a thread (WgmmaTileMainloop's fragment layout), into running statistics kept
// in the thread's registers. No shared-memory logit tile and no barrier: the shared memory is
// all the ring's, and a warp starts its epilogue as soon as its own products are done.
//
// The four lanes that share a row each keep the statistics of their own columns across the
// split's tiles; they are merged once, in store, in a fixed lane order, so the result does not
// depend on timing. Same interface as LogpEpilogue (fwd_epilogue.cuh): init, consume_tile, store.
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, int V_VALID, bool ENTROPY, class Mainloop>
struct LogpFragmentEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;

  RowPartial run[2];  // the thread's two rows, over its columns so far
  int target_col[2];  // the row's target in shard columns, or -1 (see LogpEpilogue::init)

  __device__ explicit LogpFragmentEpilogue(unsigned char* /*region: none needed*/) {}

  __device__ __forceinline__ void init(const void* targets, long long row0, long long n_rows,
                                       long long vocab_start, int tid) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      run[h].max = neg_inf();
      run[h].sum = 0.0f;
      run[h].ent = 0.0f;
      run[h].target = neg_inf();
      target_col[h] = -1;
      const long long row = row0 + Mainloop::fragment_row(tid / 32, tid % 32, h);
      if (row < n_rows) {
        const long long t = static_cast<long long>(static_cast<const TargetT*>(targets)[row]);
        if (t >= vocab_start && t - vocab_start < V_VALID) target_col[h] = static_cast<int>(t - vocab_start);
      }
    }
  }

  // Folds the finished tile whose column 0 is shard column n0. z = (acc + bias) * inv_temperature,
  // written over the accumulators; columns at or past V_VALID are excluded. Rows past n_rows
  // (zero-filled X) are folded too but never stored.
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, int /*rows*/, const void* bias,
                                               float inv_temperature, int /*warp*/, int lane) {
    mainloop.finish();
    float* const acc = mainloop.acc;
    const int limit = V_VALID - n0;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = Mainloop::fragment_col(lane, g, e);
        float b = 0.0f;
        if constexpr (kBias) {
          if (col < limit) b = to_float(static_cast<const BiasT*>(bias)[n0 + col]);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float& a = acc[4 * g + 2 * h + e];
          a = col < limit ? (kBias ? (a + b) * inv_temperature : a * inv_temperature) : neg_inf();
        }
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float tile_max = neg_inf();
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
#pragma unroll
        for (int e = 0; e < 2; ++e) tile_max = fmaxf(tile_max, acc[4 * g + 2 * h + e]);
      float sum = 0.0f;
      float ent = 0.0f;
      // The owning lane keeps the very z that entered the max, so logp <= 0 holds exactly.
      const int tcol = target_col[h] - n0;
      float target = neg_inf();
#pragma unroll
      for (int g = 0; g < kGroups; ++g)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float z = acc[4 * g + 2 * h + e];
          if (z != neg_inf()) {
            const float shift = z - tile_max;
            const float p = expf(shift);
            sum += p;
            if (ENTROPY) ent += p * shift;
          }
          if (Mainloop::fragment_col(lane, g, e) == tcol) target = z;
        }
      merge_stats<ENTROPY>(run[h], tile_max, sum, ent);
      run[h].target = fmaxf(run[h].target, target);
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
};

}  // namespace kernels
}  // namespace shardjit
