// dZ epilogue of linear_logp_bwd_dz on the Hopper main loop: the finished tile is turned into dZ
// straight from the wgmma accumulators, which hold two rows and BN / 4 columns a thread
// (WgmmaTileMainloop's fragment layout), and written to the chunk's dZ buffer pair by pair. No
// shared-memory logit tile and no barrier: the ring takes the whole shared memory (a fourth
// stage, and a slice of wgmma left in flight), and a warp writes its rows as soon as its own
// products are done. Same formula, zeros, padding and FILTER rule as DzEpilogue
// (bwd_dz_epilogue.cuh), and the same interface: init, consume_tile, store_zero_tile, tile_max.
#pragma once

#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, class DZ, int V_VALID, bool FILTER, class Mainloop>
struct DzFragmentEpilogue {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;

  BwdRow row[2];           // the thread's two rows (fragment_row half 0 and 1)
  unsigned int* tile_max;  // FILTER: bits of the largest |dZ| (non-negative floats order as integers)

  // `region`: the epilogue's part of shared memory, the tile max alone.
  __device__ explicit DzFragmentEpilogue(unsigned char* region) : tile_max(reinterpret_cast<unsigned int*>(region)) {}

  // The tile max is published by the first K-loop barrier.
  __device__ __forceinline__ void init(const LinearLogpBwdDzArgs& args, long long row0, int tid) {
    const float s = args.scale != nullptr ? *args.scale : 1.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const long long i = row0 + Mainloop::fragment_row(tid / 32, tid % 32, h);
      row[h] = BwdRow{0.0f, 0.0f, 0.0f, kBwdNoGradient};
      if (i < args.n_rows) row[h] = bwd_row<TargetT, V_VALID>(args, i, s);
    }
    if (FILTER && tid == 0) *tile_max = 0u;
  }

  // dZ of the finished tile whose column 0 is shard column n0 (chunk column c0), for its first
  // `n` rows, written to `out` (the dZ of row 0, column c0); with FILTER the largest |dZ| is
  // folded into tile_max.
  __device__ __forceinline__ void consume_tile(Mainloop& mainloop, int n0, int c0, int n,
                                               const LinearLogpBwdDzArgs& args, DZ* out, int warp, int lane) const {
    mainloop.finish();
    const float* const acc = mainloop.acc;
    const int padded = dz_padded_cols(args);
    unsigned int local_max = 0u;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int col = Mainloop::fragment_col(lane, g, 0);
      // A pair starts at an even column and the padded width is a multiple of 8: a pair is
      // wholly inside the written columns or wholly outside.
      if (c0 + col >= padded) continue;
      bool valid[2];
      float bias[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        valid[e] = n0 + col + e < V_VALID && c0 + col + e < args.chunk_cols;
        bias[e] = 0.0f;
        if constexpr (kBias) {
          if (valid[e]) bias[e] = to_float(static_cast<const BiasT*>(args.bias)[n0 + col + e]);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = Mainloop::fragment_row(warp, lane, h);
        if (r >= n) continue;
        float dz[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float z = (acc[4 * g + 2 * h + e] + bias[e]) * args.inv_temperature;
          const float p = expf(z - row[h].lse);
          const float value = row[h].coef_p * p + (n0 + col + e == row[h].target ? row[h].coef_t : 0.0f);
          dz[e] = valid[e] && row[h].target != kBwdNoGradient ? value : 0.0f;
          // As bits, a NaN is larger than every number and keeps its tile.
          const unsigned int bits = __float_as_uint(fabsf(dz[e]));
          local_max = bits > local_max ? bits : local_max;
        }
        store_dz(out + r * args.dz_stride + col, dz);
      }
    }
    if constexpr (FILTER) fold_tile_max(tile_max, local_max, lane);
  }

  // Writes zeros to the first `n` rows of the tile at chunk column c0, each element by the thread
  // that consume_tile gives it to (so after its dZ, in program order).
  __device__ __forceinline__ void store_zero_tile(int c0, int n, const LinearLogpBwdDzArgs& args, DZ* out, int warp,
                                                  int lane) const {
    const int padded = dz_padded_cols(args);
    const float zeros[2] = {0.0f, 0.0f};
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      const int col = Mainloop::fragment_col(lane, g, 0);
      if (c0 + col >= padded) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = Mainloop::fragment_row(warp, lane, h);
        if (r < n) store_dz(out + r * args.dz_stride + col, zeros);
      }
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
