// Epilogue of linear_logp_fwd_keep (fwd_keep.cuh): a finished tile of the kept chunk, in the wgmma
// accumulators (two rows and BN / 4 columns a thread, WgmmaTileMainloop's fragment layout), gives
// the forward its rows' partials over the tile and keeps the logits for the backward:
//   m = max over the tile's valid columns of z = (acc + bias) * inv_temperature (the row's four
//       lanes agree on it),
//   the kept value of each column: fp16(z - m), written through the box store as dZ is
//       (FragmentTileBoxStore), zeros at columns in the shard's padding (past args.valid_local)
//       or past the chunk,
//   the row's partial over the tile (partials.cuh): max m, sum of exp(z - m), its entropy term,
//       the target's z where the row's target lies in the tile; to tile_partials.
//
// Why fp16 and relative to the tile max: z - m lies in (-inf, 0], where fp16 keeps 11 bits, so
// exp(z - m) is within 2^-11 relative where it matters (|z - m| < 1; bf16 dZ itself rounds to
// 2^-9) and within 0.4 % for |z - m| < 16, whose terms are below e^-8 of the row's largest. A
// logit below m - 65504 becomes -inf: a term of exactly 0 (bwd_kept_dz.cuh reads it as -65504).
//
// Same interface as DzFragmentEpilogue (bwd_dz_fragment_epilogue.cuh), for logit_tiles_hopper
// (logit_tiles_hopper.cuh).
#pragma once

#include "common/fragment_box_store.cuh"
#include "common/fragment_store_layout.cuh"
#include "common/host_device.cuh"
#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/fragment_bias.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, class Mainloop>
struct KeptLogitsEpilogue {
  using Loop = Mainloop;
  using Out = fp16;
  static constexpr bool kFilter = false;
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static constexpr int kCols = Mainloop::kTileCols;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  using Store = FragmentTileBoxStore<fp16, Mainloop, fragment_store_parts(2)>;
  static constexpr int kStagingBytes = Store::kBytes;
  // The region the dZ epilogue keeps its tile max in; laid out by the host for both, unused here.
  static constexpr int kRegionBytes = 16;

  long long target[2];     // the thread's two rows' global target ids; -1 past n_rows
  unsigned char* staging;  // kStagingBytes, for the Store
  const TmaDescriptor* map;  // the chunk's kept logits, [n_rows][padded columns] of fp16

  __device__ KeptLogitsEpilogue(unsigned char* staging_area, unsigned char* /*region*/, const TmaDescriptor* kept_map)
      : staging(staging_area), map(kept_map) {}

  static __device__ __forceinline__ void wait_stores(int lane) { Store::wait_reads(lane); }

  // Issues the reads of the rows' targets, looked at only after the tile's products.
  __device__ __forceinline__ void init(const LinearLogpBwdDzArgs& args, long long row0, int tid, int /*tile_count*/) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long row = row0 + Mainloop::fragment_row(tid / 32, tid % 32, h);
      target[h] = row < args.n_rows ? static_cast<long long>(static_cast<const TargetT*>(args.targets)[row]) : -1;
    }
  }

  // Keeps the finished tile whose column 0 is shard column n0 (chunk column c0, X row row0) and
  // writes its rows' partials. Every compute thread calls it.
  __device__ __forceinline__ bool consume_tile(Mainloop& mainloop, int n0, int c0, long long row0, int /*n*/,
                                               const LinearLogpBwdDzArgs& args, fp16* /*out*/, int warp, int lane) {
    mainloop.finish();
    float* const acc = mainloop.acc;
    // Chunks are whole tiles, so a tile is partial only where the shard's columns with logits end.
    const int valid_cols = min_int(args.valid_local - n0, args.chunk_cols - c0);
    const float inv_temperature = args.inv_temperature;
    if constexpr (kBias) {
      add_fragment_bias<BiasT, Mainloop>(acc, 0, kGroups, n0, valid_cols, args.bias, inv_temperature, lane);
    }
    float tile_max[2];
    float target_z[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // inv_temperature > 0 keeps the order: the max of the raw sums, scaled once.
      float m = neg_inf();
      if (valid_cols >= kCols) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
#pragma unroll
          for (int e = 0; e < 2; ++e) m = fmaxf(m, acc[4 * g + 2 * h + e]);
      } else {
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (Mainloop::fragment_col(lane, g, e) < valid_cols) m = fmaxf(m, acc[4 * g + 2 * h + e]);
          }
      }
      float t = neg_inf();
      // The column loop runs only in the one tile of the row that holds the target.
      const long long target_col = target[h] - args.vocab_start - n0;
      if (target_col >= 0 && target_col < valid_cols) {
#pragma unroll
        for (int g = 0; g < kGroups; ++g)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if (Mainloop::fragment_col(lane, g, e) == target_col) t = acc[4 * g + 2 * h + e] * inv_temperature;
          }
      }
#pragma unroll
      for (int offset = 1; offset < 4; offset <<= 1) {
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
        t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, offset));
      }
      tile_max[h] = m * inv_temperature;
      target_z[h] = t;
    }
    float sum[2] = {0.0f, 0.0f};
    float ent[2] = {0.0f, 0.0f};
    // Each part of the store is kept just before it is staged, beside the previous part's copies.
    if (valid_cols >= kCols) {
      Store::store(acc, staging, map, c0, row0, warp, lane, [&](int first, int count) {
        keep_part<true>(acc, first, count, valid_cols, tile_max, inv_temperature, sum, ent, lane);
      });
    } else {
      Store::store(acc, staging, map, c0, row0, warp, lane, [&](int first, int count) {
        keep_part<false>(acc, first, count, valid_cols, tile_max, inv_temperature, sum, ent, lane);
      });
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int offset = 1; offset < 4; offset <<= 1) {
        sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], offset);
        ent[h] += __shfl_xor_sync(0xffffffffu, ent[h], offset);
      }
      const long long row = row0 + Mainloop::fragment_row(warp, lane, h);
      if ((lane & 3) == 0 && row < args.n_rows) {
        partials_of(args, c0)[row] = RowPartial{tile_max[h], sum[h], ent[h], target_z[h]};
      }
    }
    return true;
  }

  // A tile wholly in the shard's padding: its rows' partials are empty (the backward writes its
  // dZ as zeros whatever was kept).
  __device__ __forceinline__ void store_zero_tile(int c0, long long row0, int n, const LinearLogpBwdDzArgs& args,
                                                  fp16* /*out*/, int warp, int lane) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = Mainloop::fragment_row(warp, lane, h);
      if ((lane & 3) == 0 && r < n) partials_of(args, c0)[row0 + r] = empty_partial();
    }
  }

 private:
  // z - m in place of column groups [first, first + count), their terms added to sum and ent;
  // zeros at columns past valid_cols. WHOLE: every column of the tile is valid, none is tested.
  template <bool WHOLE>
  static __device__ __forceinline__ void keep_part(float* acc, int first, int count, int valid_cols,
                                                   const float (&tile_max)[2], float inv_temperature, float (&sum)[2],
                                                   float (&ent)[2], int lane) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int g = first; g < first + count; ++g)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = acc[4 * g + 2 * h + e];
          const float d = fmaf(v, inv_temperature, -tile_max[h]);
          if (WHOLE || Mainloop::fragment_col(lane, g, e) < valid_cols) {
            const float p = exp2_approx(d * kLog2e);
            sum[h] += p;
            ent[h] += p * d;
            v = d;
          } else {
            v = 0.0f;
          }
        }
  }

  // The partials of the column tile at chunk column c0, one a row.
  static __device__ __forceinline__ RowPartial* partials_of(const LinearLogpBwdDzArgs& args, int c0) {
    return args.tile_partials + static_cast<long long>(c0 / kCols) * args.n_rows;
  }
};

}  // namespace kernels
}  // namespace shardjit
