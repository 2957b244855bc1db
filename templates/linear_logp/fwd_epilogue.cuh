// Online log-sum-exp epilogue of linear_logp_fwd. Independent of the main loop: it only reads
// the fp32 logit tile [BM][ld] that a main loop (mma.sync, SIMT, or later wgmma) left in shared
// memory, and keeps per-row running statistics in shared memory across the vocabulary tiles of
// the block's split.
//
// Row r of the tile belongs to warp r % WARPS for the whole kernel, so the running statistics
// need no barrier between tiles; interleaving rows over warps keeps all warps busy when the
// batch has only a few rows. A warp reads a row with one vector load per lane.
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, int BM, int BN, int V_VALID, bool ENTROPY, int THREADS>
struct LogpEpilogue {
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kRowsPerWarp = BM / kWarps;
  static constexpr int kColsPerLane = BN / 32;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static_assert(BM % kWarps == 0, "rows must split evenly over warps");
  static_assert(kColsPerLane == 2 || kColsPerLane == 4, "a lane reads a float2 or a float4");

  RowPartial* stats;  // [BM]
  int* target_col;    // [BM]

  // Empty statistics, and each row's target as a column of this shard (-1 when the target is
  // elsewhere: another shard, padding, ignore_index, or out of range — combine judges those).
  __device__ __forceinline__ void init(const void* targets, long long row0, long long n_rows,
                                       long long vocab_start, int tid) const {
    for (int r = tid; r < BM; r += THREADS) {
      RowPartial empty;
      empty.max = neg_inf();
      empty.sum = 0.0f;
      empty.ent = 0.0f;
      empty.target = neg_inf();
      stats[r] = empty;
      int col = -1;
      if (row0 + r < n_rows) {
        const long long t = static_cast<long long>(static_cast<const TargetT*>(targets)[row0 + r]);
        if (t >= vocab_start && t - vocab_start < V_VALID) col = static_cast<int>(t - vocab_start);
      }
      target_col[r] = col;
    }
  }

  // Folds the tile whose column 0 is shard column n0 into the running statistics of the first
  // `rows` rows. z = (acc + bias) * inv_temperature; columns at or past V_VALID are excluded.
  __device__ __forceinline__ void consume(const float* logits, int ld, int n0, int rows,
                                          const void* bias, float inv_temperature, int warp,
                                          int lane) const {
    const int c0 = lane * kColsPerLane;
    bool valid[kColsPerLane];
    float b[kColsPerLane];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      valid[j] = c0 + j < V_VALID - n0;
      b[j] = 0.0f;
      if constexpr (kBias) {
        if (valid[j]) b[j] = to_float(static_cast<const BiasT*>(bias)[n0 + c0 + j]);
      }
    }
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = i * kWarps + warp;
      if (r >= rows) break;
      float acc[kColsPerLane];
      if constexpr (kColsPerLane == 4) {
        const float4 v = *reinterpret_cast<const float4*>(logits + r * ld + c0);
        acc[0] = v.x;
        acc[1] = v.y;
        acc[2] = v.z;
        acc[3] = v.w;
      } else {
        const float2 v = *reinterpret_cast<const float2*>(logits + r * ld + c0);
        acc[0] = v.x;
        acc[1] = v.y;
      }
      float z[kColsPerLane];
      float tile_max = neg_inf();
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        z[j] = valid[j] ? (kBias ? (acc[j] + b[j]) * inv_temperature : acc[j] * inv_temperature)
                        : neg_inf();
        tile_max = fmaxf(tile_max, z[j]);
      }
      tile_max = warp_max(tile_max);
      float sum = 0.0f;
      float ent = 0.0f;
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        if (z[j] != neg_inf()) {
          const float shift = z[j] - tile_max;
          const float e = expf(shift);
          sum += e;
          if (ENTROPY) ent += e * shift;
        }
      }
      sum = warp_sum(sum);
      if (ENTROPY) ent = warp_sum(ent);

      // The owning lane hands over the very z that entered the max, so logp <= 0 holds exactly.
      const int tcol = target_col[r] - n0;
      float target = neg_inf();
      if (tcol >= 0 && tcol < BN) {
        float mine = neg_inf();
#pragma unroll
        for (int j = 0; j < kColsPerLane; ++j) {
          if (c0 + j == tcol) mine = z[j];
        }
        target = __shfl_sync(0xffffffffu, mine, tcol / kColsPerLane);
      }
      if (lane == 0) {
        RowPartial run = stats[r];
        merge_stats<ENTROPY>(run, tile_max, sum, ent);
        run.target = fmaxf(run.target, target);
        stats[r] = run;
      }
    }
  }

  // Writes the rows of the tile that exist; call after a barrier that follows the last consume.
  __device__ __forceinline__ void store(RowPartial* out, long long row0, long long n_rows,
                                        int tid) const {
    for (int r = tid; r < BM; r += THREADS) {
      if (row0 + r < n_rows) out[row0 + r] = stats[r];
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
