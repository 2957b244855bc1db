// Online log-sum-exp epilogue of linear_logp_fwd on the portable main loops (mma.sync, fp32
// SIMT): the main loop hands each finished BM x BN tile over COLS columns at a time through the
// fp32 logit tile [BM][ld] in shared memory, and the epilogue keeps per-row running statistics
// in shared memory across the vocabulary tiles (and column chunks) of the block's split. The
// Hopper loop's epilogue (fwd_fragment_epilogue.cuh) has the same three steps (init,
// consume_tile, store), with the shard's valid columns taken at run time.
//
// Row r of the tile belongs to warp r % WARPS for the whole kernel, so the running statistics
// need no barrier between tiles; interleaving rows over warps keeps all warps busy when the
// batch has only a few rows. A row is read by a group of 8 lanes, COLS / 8 columns a lane in
// float4s, so a warp takes 4 rows at a time: each lane has several independent columns in
// flight, a row's reductions take 3 shuffles instead of 5, and each 8-lane phase of a float4
// load reads 128 contiguous bytes of one row (no bank conflict for any row stride).
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/bias_read.cuh"
#include "linear_logp/fwd_layout.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, int BM, int BN, int V_VALID, bool ENTROPY, int THREADS>
struct LogpEpilogue {
  static constexpr int COLS = logit_chunk_cols(BM, BN);
  static constexpr int kChunks = BN / COLS;
  static constexpr int kLd = linear_logp_fwd_logit_ld(COLS);
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kRowsPerWarp = BM / kWarps;
  static constexpr int kLanesPerRow = 8;
  static constexpr int kRowsPerStep = 32 / kLanesPerRow;
  static constexpr int kSteps = kRowsPerWarp / kRowsPerStep;
  // Lane p of a row's group holds columns 32 v + 4 p + e, v < kVecs, e < 4.
  static constexpr int kVecs = COLS / (4 * kLanesPerRow);
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static_assert(BN % COLS == 0, "the tile goes in whole chunks");
  static_assert(BM % kWarps == 0, "rows must split evenly over warps");
  static_assert(kRowsPerWarp % kRowsPerStep == 0, "a warp's rows come 4 at a time");
  static_assert(COLS % (4 * kLanesPerRow) == 0 && kVecs >= 1 && kVecs <= 8,
                "a lane reads 1 to 8 float4 of a row");

  float* logits;      // [BM][kLd]
  RowPartial* stats;  // [BM]
  int* target_col;    // [BM]

  // region: the epilogue's shared memory (fwd_layout.cuh), after the ring.
  __device__ explicit LogpEpilogue(unsigned char* region)
      : logits(reinterpret_cast<float*>(region)),
        stats(reinterpret_cast<RowPartial*>(region + linear_logp_fwd_stats_offset(BM, BN))),
        target_col(reinterpret_cast<int*>(region + linear_logp_fwd_target_offset(BM, BN))) {}

  // Empty statistics, and each row's target as a column of this shard (-1 when the target is
  // elsewhere: another shard, padding, ignore_index, or out of range — combine judges those).
  __device__ __forceinline__ void init(const void* targets, long long row0, long long n_rows,
                                       long long vocab_start, int tid) const {
    for (int r = tid; r < BM; r += THREADS) {
      stats[r] = empty_partial();
      int col = -1;
      if (row0 + r < n_rows) {
        const long long t = static_cast<long long>(static_cast<const TargetT*>(targets)[row0 + r]);
        if (t >= vocab_start && t - vocab_start < V_VALID) col = static_cast<int>(t - vocab_start);
      }
      target_col[r] = col;
    }
  }

  // Folds the finished tile whose column 0 is shard column n0 into the running statistics of the
  // first `rows` rows, one chunk of COLS columns at a time. Call after the K loop's last barrier:
  // the epilogue finished reading the logit tile before it (for chunk 0), or before the barrier
  // between chunks, so it can be overwritten.
  template <class Mainloop>
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, int rows, const void* bias,
                                               float inv_temperature, int warp, int lane) const {
    static_assert(Mainloop::kSlicesInFlight == 0,
                  "the shared-memory hand-off reads the accumulators right after the K loop");
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      mainloop.template store_columns<COLS>(logits, kLd, chunk, warp, lane);
      __syncthreads();
      consume(logits, kLd, n0 + chunk * COLS, rows, bias, inv_temperature, warp, lane);
      if (chunk + 1 < kChunks) __syncthreads();
    }
  }

  // Folds the COLS columns whose column 0 is shard column n0 into the running statistics of the
  // first `rows` rows. z = (acc + bias) * inv_temperature; columns at or past V_VALID are
  // excluded.
  __device__ __forceinline__ void consume(const float* logits, int ld, int n0, int rows,
                                          const void* bias, float inv_temperature, int warp,
                                          int lane) const {
    const int part = lane % kLanesPerRow;
    const int group = lane / kLanesPerRow;
    // Value (v, e) of the lane is column 32 v + e of the lane's columns, valid below `limit`.
    const int limit = V_VALID - n0 - 4 * part;
    const float bias_min = bias_floor(inv_temperature);
    float b[kVecs][4];
#pragma unroll
    for (int v = 0; v < kVecs; ++v)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        b[v][e] = 0.0f;
        if constexpr (kBias) {
          if (32 * v + e < limit) {
            b[v][e] = read_bias<BiasT>(bias, n0 + 32 * v + 4 * part + e, bias_min);
          }
        }
      }
#pragma unroll
    for (int step = 0; step < kSteps; ++step) {
      // The step's rows are r0, r0 + kWarps, ...; past `rows` they hold finite logits of
      // zero-filled X rows, which are read but never folded in.
      const int r0 = step * kRowsPerStep * kWarps + warp;
      if (r0 >= rows) break;
      const int r = r0 + group * kWarps;
      float z[kVecs][4];
      float tile_max = neg_inf();
#pragma unroll
      for (int v = 0; v < kVecs; ++v) {
        const float4 a = *reinterpret_cast<const float4*>(logits + r * ld + 32 * v + 4 * part);
        const float acc[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          z[v][e] = 32 * v + e < limit ? (kBias ? (acc[e] + b[v][e]) * inv_temperature
                                                : acc[e] * inv_temperature)
                                       : neg_inf();
          tile_max = fmaxf(tile_max, z[v][e]);
        }
      }
      tile_max = lane_group_max<kLanesPerRow>(tile_max);
      float sum = 0.0f;
      float ent = 0.0f;
#pragma unroll
      for (int v = 0; v < kVecs; ++v)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (z[v][e] != neg_inf()) {
            const float shift = z[v][e] - tile_max;
            const float p = expf(shift);
            sum += p;
            if (ENTROPY) ent += p * shift;
          }
        }
      sum = lane_group_sum<kLanesPerRow>(sum);
      if (ENTROPY) ent = lane_group_sum<kLanesPerRow>(ent);

      // The owning lane hands over the very z that entered the max, so logp <= 0 holds exactly.
      const int tcol = target_col[r] - n0;
      float mine = neg_inf();
#pragma unroll
      for (int v = 0; v < kVecs; ++v)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (32 * v + 4 * part + e == tcol) mine = z[v][e];
        }
      const int owner = group * kLanesPerRow + ((tcol >> 2) & (kLanesPerRow - 1));
      float target = __shfl_sync(0xffffffffu, mine, owner);
      if (tcol < 0 || tcol >= COLS) target = neg_inf();
      if (part == 0 && r < rows) {
        RowPartial run = stats[r];
        merge_stats<ENTROPY>(run, tile_max, sum, ent);
        run.target = fmaxf(run.target, target);
        stats[r] = run;
      }
    }
  }

  // Writes the rows of the tile that exist; call after the last consume_tile.
  __device__ __forceinline__ void store(RowPartial* out, long long row0, long long n_rows,
                                        int tid) const {
    __syncthreads();
    for (int r = tid; r < BM; r += THREADS) {
      if (row0 + r < n_rows) out[row0 + r] = stats[r];
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
