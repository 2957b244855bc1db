// The kept chunk in the forward's tiles of the rows as N (linear_logp_fwd_rows_as_n,
// fwd_hopper.cuh): where a call's backward is one chunk kept whole and its forward runs these
// tiles, the forward kernel itself leaves each tile's logits for the backward, beside its fold
// (fwd_column_fold.cuh), instead of a kernel of 128-row tiles computing them (fwd_keep.cuh): at
// 300 rows those read 384 rows of X a vocabulary tile where two tiles of 152 read 304.
//
// What a tile leaves, as the kept chunk's kernel does (fwd_keep_epilogue.cuh), but by tiles of 128
// columns:
//   m = the row's max over the tile's valid columns of z = (acc + bias) * inv_temperature,
//   fp16(z - m) at each column of the row in args.kept, zeros at columns past the valid ones,
//   m in the max of args.kept_tile_max[tile][row] (the backward reads nothing else there:
//   bwd_kept_dz.cuh).
//
// The fragment holds two vocabulary columns (h) of each of the thread's rows of X; a row's 128
// columns lie with eight lanes of each of the block's eight warps. Its max: the thread's two, the
// warp's eight lanes by shuffles, the eight warps through shared memory (a max on ordered keys,
// then a barrier of the compute warps). The store: each 8 x 8 block of the fragment (eight columns
// by eight rows) is transposed in registers (movmatrix), so that a lane holds two adjacent columns
// of one row and writes them as one word.
//
// The code runs once a tile beside the fold, with the tensor cores idle, so it is kept short: the
// bias is added only where there is one (the fold's read of it, FwdTileColumns, with a forbidden
// token's -inf read as the floor: bias_read.cuh), the columns are checked only in the shard's last tile,
// each store's address is a step from the tile's first, and the shared-memory maxima and the
// stores that some lanes skip are single predicated instructions, not branches.
//
// Shared memory: three sets of BM keys (linear_logp_fwd_kept_max_bytes), a tile's in turn: the
// set a tile clears before its barrier was last read two tiles before, ahead of the barrier of the
// tile between, so one barrier a tile separates every clear, max and read.
#pragma once

#include "common/math.cuh"
#include "common/ptx.cuh"
#include "common/ptx_memory.cuh"
#include "common/types.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_column_fold.cuh"
#include "linear_logp/fwd_layout.cuh"

namespace shardjit {
namespace kernels {

// The named barrier of the compute warps in gather_maxima (the fold's, kColumnFoldBarrier, is 2, the
// merge's 1).
constexpr unsigned int kKeptColumnBarrier = 3;

template <class BiasT, class Mainloop, int BM>
struct KeptColumnTiles {
  static constexpr int kGroups = Mainloop::kColumnGroups;
  static_assert(kGroups * 8 == BM, "the fragment's columns are the tile's rows");
  static_assert(Mainloop::kTileRows == kKeptColumnTileCols, "the fragment's rows are the tile's columns");
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static constexpr int kThreads = 256;
  static constexpr int kSets = 3;
  using Columns = FwdTileColumns<BiasT, Mainloop>;

  int* keys = nullptr;  // [kSets][BM] the rows' maxima as ordered keys (shared memory)
  int tiles = 0;

  // Orders floats as ints: non-negative ones keep their bits, negative ones flip all but the sign.
  static __device__ __forceinline__ int order_key(float f) {
    const int i = __float_as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
  }
  static __device__ __forceinline__ float key_value(int k) { return __int_as_float(k >= 0 ? k : k ^ 0x7fffffff); }

  // Clears the first set; the caller's next barrier of the compute warps publishes it.
  __device__ __forceinline__ void init(unsigned char* smem, int tid) {
    keys = reinterpret_cast<int*>(smem);
    for (int r = tid; r < BM; r += kThreads) keys[r] = order_key(neg_inf());
  }

  // First half of keeping the finished tile (accumulators `acc`, mainloop.finish() done) of the
  // thread's `columns`, of the block's rows from row0 on: the rows' maxima, the tile max array's,
  // and where this tile's stores go. Every compute thread calls it, once a tile; store_group then
  // writes the kept values group by group, as the fold goes (LogpColumnFoldEpilogue::fold_tile),
  // so that each group's accumulators are read once more before they die instead of all staying live.
  __device__ __forceinline__ void gather_maxima(const float* acc, const Columns& columns, const LinearLogpFwdArgs& args,
                                                long long row0, int warp, int lane) {
    const int tid = warp * 32 + lane;
    current = keys + (tiles % kSets) * BM;
    int* const next = keys + ((tiles + 1) % kSets) * BM;
    ++tiles;
    for (int r = tid; r < BM; r += kThreads) next[r] = order_key(neg_inf());
    // The rows' maxima of (acc + bias); inv_temperature > 0 keeps the order, so z's max is it scaled.
    const bool whole = columns.whole;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float a0 = acc[Mainloop::accumulator_index(0, g, e)];
        float a1 = acc[Mainloop::accumulator_index(1, g, e)];
        if constexpr (kBias) {
          a0 += columns.b[0];
          a1 += columns.b[1];
        }
        float m = fmaxf(a0, a1);
        if (!whole) m = columns.valid[1] ? m : (columns.valid[0] ? a0 : neg_inf());
#pragma unroll
        for (int offset = 4; offset < 32; offset <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
        red_shared_max_s32_if(lane < 4, current + Mainloop::fragment_col(lane, g, e), order_key(m));
      }
    bar_sync(kKeptColumnBarrier, kThreads);
    if (tid < BM && row0 + tid < args.n_rows) {
      args.kept_tile_max[static_cast<long long>(columns.n0 / kKeptColumnTileCols) * args.n_rows + row0 + tid].max =
          key_value(current[tid]) * args.inv_temperature;
    }
    // Lane l's word after the transpose: row l / 4 of a group's eight, columns 2 (l % 4) and
    // 2 (l % 4) + 1 of the eight of h; the tile's first such word here, a group's eight rows on.
    const long long row = row0 + lane / 4;
    const int col0 = columns.n0 + Mainloop::fragment_row(warp, 0, 0) + 2 * (lane & 3);
    store_at = static_cast<fp16*>(args.kept) + row * args.kept_stride + col0;
    const long long left = args.n_rows - row;
    rows_left = left < BM ? static_cast<int>(left) : BM;
#pragma unroll
    for (int h = 0; h < 2; ++h) col_stored[h] = col0 + 8 * h < args.kept_cols;
  }

  // Writes the kept values of fragment column group g (rows 8 g to 8 g + 7 of the tile) after
  // gather_maxima. Every lane of the warp calls it (the transpose is the warp's).
  __device__ __forceinline__ void store_group(int g, const float* acc, const Columns& columns,
                                              const LinearLogpFwdArgs& args, int warp, int lane) const {
    // The fold before it branches on the thread's rows; the transpose is the whole warp's.
    __syncwarp();
    const float inv_temperature = args.inv_temperature;
    float m[2];
#pragma unroll
    for (int e = 0; e < 2; ++e) m[e] = key_value(current[Mainloop::fragment_col(lane, g, e)]) * inv_temperature;
    fp16* const at = store_at + g * 8 * args.kept_stride;
    const bool row_stored = 8 * g < rows_left;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float d[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float v = acc[Mainloop::accumulator_index(h, g, e)];
        const float a = kBias ? v + columns.b[h] : v;
        d[e] = fmaf(a, inv_temperature, -m[e]);
        if (!columns.whole && !columns.valid[h]) d[e] = 0.0f;
      }
      const unsigned int word = movmatrix_trans(pack_pair<fp16>(d[0], d[1]));
      st_global_u32_if(row_stored && col_stored[h], at + 8 * h, word);
    }
  }

 private:
  int* current = nullptr;    // the set of the tile between gather_maxima and its store_group calls
  fp16* store_at = nullptr;  // the tile's first word of this lane (group 0, h = 0)
  int rows_left = 0;         // rows of X from this lane's first one to n_rows, at most BM
  bool col_stored[2] = {};   // whether this lane's columns of h lie before kept_cols
};

// What a kernel built without KEEP holds in KeptColumnTiles' place (fwd_hopper.cuh): nothing, and
// no KeptColumnTiles of its tile is ever instantiated, as none of 256 columns could be.
struct NoKeptColumnTiles {};

}  // namespace kernels
}  // namespace shardjit
