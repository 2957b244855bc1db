// dZ epilogue of linear_logp_bwd_dz_hopper (the Hopper main loop): the finished tile is turned into dZ
// in place in the wgmma accumulators, which hold two rows and BN / 4 columns a thread
// (WgmmaTileMainloop's fragment layout), and written out through a staging area of its own, in
// column parts (FragmentTileStore, templates/common/fragment_store.cuh), so that the ring goes on
// loading the block's next tile meanwhile. Same
// formula, zeros, padding and FILTER rule as DzEpilogue (bwd_dz_epilogue.cuh), and the same
// interface: init, consume_tile, store_zero_tile. The shard's columns with logits come at run
// time (args.valid_local), so the kernel serves every shape.
//
// A logit costs one FFMA, one ex2 and one FMUL, as in the forward's fold:
//   dZ = coef_p * 2^u,  u = acc * inv_temperature * log2(e) - lse * log2(e)   (+ coef_t at the target),
// and one FFMA more with an entropy gradient: dZ = (coef_p + coef_z ln(2) u) * 2^u, u being
// (z - lse) log2(e);
// with the target's term added by the one thread that holds it, and the zeros of padding
// columns, columns past the chunk and rows without a gradient written over the values only in
// the tiles and rows that have them.
#pragma once

#include "common/fragment_box_store.cuh"
#include "common/fragment_store.cuh"
#include "common/host_device.cuh"
#include "common/math.cuh"
#include "common/ptx_memory.cuh"
#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/fragment_bias.cuh"

namespace shardjit {
namespace kernels {

template <class BiasT, class TargetT, class DZ, bool FILTER, class Mainloop>
struct DzFragmentEpilogue {
  using Loop = Mainloop;
  using Out = DZ;
  static constexpr bool kFilter = FILTER;
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static constexpr int kCols = Mainloop::kTileCols;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  // 16-bit dZ goes out in boxes of the dZ map (one TMA store a box), fp32 dZ a row at a time.
  static constexpr bool kBoxes = sizeof(DZ) == 2;
  using Store = typename conditional_type<kBoxes, FragmentTileBoxStore<DZ, Mainloop, fragment_store_parts(sizeof(DZ))>,
                                          FragmentTileStore<DZ, Mainloop, fragment_store_parts(sizeof(DZ))>>::type;

  BwdRowInputs input[2];   // the thread's two rows (fragment_row half 0 and 1), as read
  float scale_input;       // the storage scale, as read
  unsigned char* staging;  // kStagingBytes, for the Store
  const TmaDescriptor* dz_map;  // 16-bit dZ: the chunk's [n_rows][padded columns]
  unsigned int* tile_max;  // FILTER: two of the bits of a tile's largest |dZ| (non-negative floats order as integers)
  unsigned int* current_max = nullptr;  // the current tile's

  static constexpr int kStagingBytes = Store::kBytes;
  // The last stores' copies must have read the staging area before the block's shared memory goes.
  static __device__ __forceinline__ void wait_stores(int lane) { Store::wait_reads(lane); }
  // Shared memory beside the staging: the tile max, two of them (see init).
  static constexpr int kRegionBytes = 16;

  // `staging`: kStagingBytes on a 1024-byte boundary; `region`: kRegionBytes.
  __device__ DzFragmentEpilogue(unsigned char* staging_area, unsigned char* region, const TmaDescriptor* map)
      : staging(staging_area), dz_map(map), tile_max(reinterpret_cast<unsigned int*>(region)) {}

  // Issues the reads of the rows' inputs of the block's computed tile number `tile_count` (0, 1,
  // ... of this block's tiles with products) and clears its tile max. Nothing looks at the values
  // before consume_tile, so the reads complete under the tile's products. The tiles use two tile
  // max in turn: this clear and the reads of the tile before last are separated by the last
  // tile's barriers. The compute warps' barrier after init publishes it.
  __device__ __forceinline__ void init(const LinearLogpBwdDzArgs& args, long long row0, int tid, int tile_count) {
    current_max = tile_max + (tile_count & 1);
    scale_input = read_bwd_scale(args);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      input[h] = read_bwd_row_inputs<TargetT>(args, row0 + Mainloop::fragment_row(tid / 32, tid % 32, h));
    }
    if (FILTER && tid == 0) *current_max = 0u;
  }

  // Writes the dZ of the finished tile whose column 0 is shard column n0 (chunk column c0) for
  // its first `n` rows to `out` (the dZ of row 0, column c0). With FILTER, a tile whose |dZ| all
  // lie below the threshold is written as zeros; returns whether it was not. Every compute thread
  // calls it (with FILTER it synchronizes them).
  //
  // Without FILTER each column part of the store is turned into dZ just before it is staged, so
  // that the part's arithmetic runs while the previous part's copies read the staging area.
  __device__ __forceinline__ bool consume_tile(Mainloop& mainloop, int n0, int c0, long long row0, int n,
                                               const LinearLogpBwdDzArgs& args, DZ* out, int warp, int lane) {
    mainloop.finish();
    float* const acc = mainloop.acc;
    BwdRow row[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) row[h] = bwd_row(input[h], args, scale_input, args.valid_local);
    // Columns of the tile with a gradient: before the shard's padding and inside the chunk.
    const int valid_cols = min_int(args.valid_local - n0, args.chunk_cols - c0);
    const bool entropy = bwd_has_entropy(args);
    // dZ in place of column groups [first, first + count) of the accumulators.
    auto to_dz = [&](int first, int count) {
      if constexpr (kBias) add_fragment_bias<BiasT, Mainloop>(acc, first, count, n0, valid_cols, args.bias,
                                                                args.inv_temperature, lane);
      const float scale = args.inv_temperature * kLog2e;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float offset = -row[h].lse * kLog2e;
        const float coef_p = row[h].coef_p;
        if (entropy) {
          const float coef_u = row[h].coef_z * kBwdLn2;
#pragma unroll
          for (int g = first; g < first + count; ++g)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& v = acc[4 * g + 2 * h + e];
              const float u = fmaf(v, scale, offset);
              v = fmaf(coef_u, u, coef_p) * exp2_approx(u);
            }
        } else {
#pragma unroll
          for (int g = first; g < first + count; ++g)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              float& v = acc[4 * g + 2 * h + e];
              v = coef_p * exp2_approx(fmaf(v, scale, offset));
            }
        }
        add_target_term(acc, row[h], h, first, count, n0, lane);
        if (valid_cols < kCols || row[h].target == kBwdNoGradient) zero_outside(acc, row[h], h, first, count, valid_cols, lane);
      }
    };
    if constexpr (!FILTER) {
      store_tile(acc, c0, row0, n, args, out, warp, lane, to_dz);
      return true;
    } else {
      to_dz(0, kGroups);
      unsigned int local_max = 0u;
#pragma unroll
      for (int i = 0; i < Mainloop::kAccumulators; ++i) {
        // As bits, a NaN is larger than every number and keeps its tile.
        const unsigned int bits = __float_as_uint(fabsf(acc[i]));
        local_max = bits > local_max ? bits : local_max;
      }
      fold_tile_max(current_max, local_max, lane);
      // Every warp has folded its values into the tile max (the compute warps only: the ring's
      // producer warp takes no part). A warp stages only its own rows, so nothing else waits.
      bar_sync(1, Mainloop::kThreads);
      const bool keep = dz_tile_kept(*current_max, args);
      if (!keep) {
#pragma unroll
        for (int i = 0; i < Mainloop::kAccumulators; ++i) acc[i] = 0.0f;
      }
      store_tile(acc, c0, row0, n, args, out, warp, lane, [](int, int) {});
      return keep;
    }
  }

  // Writes zeros to the first `n` rows of the tile at chunk column c0 (X row row0): a tile wholly
  // in the shard's padding (past args.valid_local), for which no products were computed.
  __device__ __forceinline__ void store_zero_tile(int c0, long long /*row0*/, int n, const LinearLogpBwdDzArgs& args,
                                                  DZ* out, int warp, int lane) const {
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

 private:
  // The tile's first n rows and the chunk's padded columns, through the Store (see its store).
  template <class Prepare>
  __device__ __forceinline__ void store_tile(float* acc, int c0, long long row0, int n, const LinearLogpBwdDzArgs& args,
                                             DZ* out, int warp, int lane, Prepare&& prepare) const {
    if constexpr (kBoxes) {
      Store::store(acc, staging, dz_map, c0, row0, warp, lane, prepare);
    } else {
      const int cols = min_int(kCols, dz_padded_cols(args) - c0);
      Store::store(acc, staging, out, args.dz_stride, n, cols * static_cast<int>(sizeof(DZ)), warp, lane, prepare);
    }
  }

  // coef_t at row half h's target, where this thread holds it among column groups [first, first +
  // count): the loop runs only in the one tile of the row that holds the target.
  static __device__ __forceinline__ void add_target_term(float* acc, const BwdRow& row, int h, int first, int count,
                                                         int n0, int lane) {
    const int tcol = row.target - n0;
    if (tcol < 0 || tcol >= kCols) return;
#pragma unroll
    for (int g = first; g < first + count; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (Mainloop::fragment_col(lane, g, e) == tcol) acc[4 * g + 2 * h + e] += row.coef_t;
      }
  }

  // Zeros for row half h's columns at or past valid_cols among column groups [first, first +
  // count), or for all of them if the row has no gradient (whatever the logits held: exp of an
  // infinite or NaN logit times a zero coefficient would not be zero).
  static __device__ __forceinline__ void zero_outside(float* acc, const BwdRow& row, int h, int first, int count,
                                                      int valid_cols, int lane) {
    const int limit = row.target == kBwdNoGradient ? 0 : valid_cols;
#pragma unroll
    for (int g = first; g < first + count; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        if (Mainloop::fragment_col(lane, g, e) >= limit) acc[4 * g + 2 * h + e] = 0.0f;
      }
  }
};

}  // namespace kernels
}  // namespace shardjit
