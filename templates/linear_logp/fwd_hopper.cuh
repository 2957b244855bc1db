// The forward on the Hopper loop (sm_90a, 16-bit inputs): the kernel fwd.cuh describes, with two
// compute warpgroups and a producer warp. The block takes the same unit or piece as on the
// portable loops (fwd_block_order.cuh), and its producer walks the K slices of all the block's
// tiles through one TMA ring (templates/common/tma_ring.cuh), so that while the compute warps
// fold a finished tile, the ring already fills with the next tile's slices.
//
// Specialized for the types, the tile and entropy only: H and the shard's valid columns come in
// the arguments (hidden_size, valid_local), and the TMA maps carry H and W's valid rows, so one
// kernel serves every model of a dtype and is built with the library (tools/prebuild). Nothing
// in the loop gains from a constant shape: the K loop is not unrolled (common/tma_ring.cuh), and
// the block's share is worked out once.
//
// Parameters: LinearLogpFwdParams with the TMA maps of X and of W's valid rows. Grid: as fwd.cuh
// says; block linear_logp_fwd_block_threads(true); dynamic shared memory
// linear_logp_fwd_smem_bytes(sizeof(T), BM, BN, BK, STAGES, true).
//
// Why not the cp.async ring of the portable loops: there every compute thread issues its share
// of each slice's copies and the block meets at a barrier every slice, ~110 instructions a warp
// a slice of which 4 are products; here the compute warps issue their wgmma and their waits, and
// the forward draws as little power a product as the backward's TMA-fed kernels
// (docs/perf-notes.md, "Why the forward is tiled this way").
//
// The last row tile, where it has fewer rows than the tile (a call of fewer rows than the tile, or
// 150 rows' second tile of 22), reads X in place, in boxes of its rows rounded up to 8
// (common/row_tile_box.cuh); the stage's rows past the box keep whatever the shared memory held
// and, like the rows past n_rows, reach only accumulators of rows that are never stored. In a call
// of one row tile, a warpgroup whose 64 rows all lie past the call's issues no products: at a few
// rows the tensor cores then do half the tile's work a slice, which a block of a long K (a TP shard
// of H = 8192 at one tile a block) otherwise spends more time on than on reading its W tile. After
// whole row tiles it computes anyway (TmaRing::warpgroup_passes says why).
//
// Where args.arrivals is set, the block that stores a row tile's last partials merges them into
// the call's outputs (fwd_merge.cuh) instead of a combine kernel after this one.
//
// W is read with an evict-first L2 policy, as on the portable loops: the row tiles of a split
// read each W tile at about the same time and never again, and X, read once per vocabulary
// tile, should stay.
//
// Shared memory (linear_logp_fwd_smem_bytes): the ring, then its mbarriers; the epilogue works
// on the accumulators in registers (LogpFragmentEpilogue).
//
// linear_logp_fwd_rows_as_n is the same kernel in tiles of the rows as wgmma's N: BM = 136, 152 or
// 168 rows of X by 128 (or 256, below) vocabulary columns, W's box wgmma's A and X's its B, so that a call of a few
// hundred rows is covered by tiles of about its rows (300 rows: two tiles of 152, 333 two of 168,
// where 128-row tiles compute 384), as cuBLAS's kernels at such calls do (128 x 168 tiles;
// docs/perf-notes.md, "Forward tiles per call"). Its fold goes by vocabulary columns
// (LogpColumnFoldEpilogue, fwd_column_fold.cuh), which merges a row's 64 threads through the
// ring's first stage once the block's tiles are done (linear_logp_fwd_rows_as_n_smem_bytes). Each
// warpgroup holds 64 of the tile's vocabulary columns for all its rows, so neither is ever idle as
// at a call of 64 rows or fewer. In tiles of 256 vocabulary columns (BN = 256) each warpgroup holds
// two m64 blocks of them: per slice twice the products on the same X box, 16 fewer shared-memory
// bytes a cycle (134 at 152 rows, against 150 at 128 columns; docs/perf-notes.md, "Forward limits
// and next steps"), and a fold that merges a row's lanes every tile (fwd_column_fold.cuh). Built
// with KEEP (BN = 128 only), it also keeps the backward's one chunk, the whole shard, in args.kept,
// as fwd_keep.cuh would (KeptColumnTiles, fwd_column_keep.cuh): a kernel of its own, so that the
// forwards that keep nothing carry none of the keep's registers.
#pragma once

#include "common/ptx.cuh"
#include "common/row_tile_box.cuh"
#include "common/tma_ring.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block.cuh"
#include "linear_logp/fwd_column_fold.cuh"
#include "linear_logp/fwd_column_keep.cuh"
#include "linear_logp/fwd_fragment_epilogue.cuh"
#include "linear_logp/fwd_layout.cuh"
#include "linear_logp/fwd_merge.cuh"
#include "linear_logp/logit_block_shape.cuh"

namespace shardjit {
namespace kernels {

// The fold of a tile's accumulators: by rows of X (wgmma's M), or by vocabulary columns where the
// rows are wgmma's N.
template <class BiasT, class TargetT, bool ENTROPY, class Mainloop, int BM, bool ROWS_AS_N>
struct FwdHopperEpilogue {
  using type = LogpFragmentEpilogue<BiasT, TargetT, ENTROPY, Mainloop>;
};
template <class BiasT, class TargetT, bool ENTROPY, class Mainloop, int BM>
struct FwdHopperEpilogue<BiasT, TargetT, ENTROPY, Mainloop, BM, true> {
  using type = LogpColumnFoldEpilogue<BiasT, TargetT, ENTROPY, Mainloop, BM>;
};

// The kernel's body, BM x BN tiles (rows of X by vocabulary columns). ROWS_AS_N: wgmma's M is
// the tile's BN = 128 or 256 vocabulary columns (W's box first in a stage) and its N the tile's BM rows
// (X's box after it), folded by LogpColumnFoldEpilogue; else its M is the rows, folded by
// LogpFragmentEpilogue. KEEP (the rows as N only): each tile also keeps its logits for the backward.
template <class T, class BiasT, class TargetT, int BM, int BN, int BK, int STAGES, bool ENTROPY, bool ROWS_AS_N,
          bool KEEP>
__device__ __forceinline__ void linear_logp_fwd_hopper_body(const LinearLogpFwdParams& params, unsigned char* smem) {
  if constexpr (ROWS_AS_N) {
    static_assert((BN == 128 || BN == 256) && BK == 64,
                  "the rows as N: BN = 128 or 256 vocabulary columns, wgmma's M");
    static_assert(!KEEP || BN == kKeptColumnTileCols,
                  "the rows as N keep the backward's chunk in 128-column tiles only: the kept maxima go by "
                  "kKeptColumnTileCols columns, and the 256-column fold merges a row's lanes every tile");
  } else {
    static_assert(LogitTileShape<BM, BN, BK, STAGES>::valid, "the tile is checked there");
    static_assert(!KEEP, "the kept chunk's kernel keeps for these tiles (fwd_keep.cuh)");
  }
  constexpr int kElem = static_cast<int>(sizeof(T));
  // wgmma's A tile (the first in a stage) and its M.
  constexpr int kABytes = (ROWS_AS_N ? BN : BM) * BK * kElem;
  using Ring = TmaRing<STAGES, (BM + BN) * BK * kElem, kABytes>;
  static_assert(Ring::kComputeThreads == linear_logp_fwd_threads,
                "the host's merge rule (fwd_merges_in_kernel) counts the merging threads as linear_logp_fwd_threads");
  using Mainloop = WgmmaTileMainloop<T, ROWS_AS_N ? BN : 128, ROWS_AS_N ? BM : BN, BK, 1>;
  using Epilogue = typename FwdHopperEpilogue<BiasT, TargetT, ENTROPY, Mainloop, BM, ROWS_AS_N>::type;

  const LinearLogpFwdArgs& args = params.args;
  const int k_slices = (args.hidden_size + BK - 1) / BK;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const FwdBlock block = fwd_block<BM>(args, (args.valid_local + BN - 1) / BN);
  wgmma_check_alignment(smem);
  const Ring ring(smem);
  ring.init(tid);

  if (Ring::in_producer_warpgroup(warp)) {
    Ring::enter_producer();
    if (!Ring::is_producer(warp)) return;
    if (lane == 0) {
      const unsigned long long w_policy = l2_policy<L2Priority::kEvictFirst>();
      TmaRingCursor<STAGES> at;
      // A box of fewer rows than the tile fills only the first rows of X's part (see above).
      const RowTileBox x =
          row_tile_box<BM>(params.x_map, params.x_tail_map, params.x_tail_box_rows, block.rows);
      const unsigned int stage_bytes = static_cast<unsigned int>((x.rows + BN) * BK * kElem);
      constexpr unsigned int kXOffset = ROWS_AS_N ? BN * BK * kElem : 0;
      constexpr unsigned int kWOffset = ROWS_AS_N ? 0 : BM * BK * kElem;
      for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
        for (int slice = 0; slice < k_slices; ++slice) {
          // The box's rows past n_rows, columns past the valid ones and K past H come in as zeros.
          ring.produce(
              at,
              [&](unsigned int dst, unsigned int full) {
                tma_load_2d(dst + kXOffset, x.map, slice * BK, static_cast<int>(block.row0), full);
                tma_load_2d_hint(dst + kWOffset, &params.w_map, slice * BK, tile * BN, full, w_policy);
              },
              stage_bytes);
          at.advance();
        }
      }
    }
    return;
  }
  Ring::enter_compute();

  Epilogue epilogue;
  TmaRingCursor<STAGES> at;
  if constexpr (ROWS_AS_N) {
    // The fold's targets follow the ring's mbarriers (linear_logp_fwd_rows_as_n_smem_bytes); its
    // merge takes the ring's first stage once the tiles are done.
    static_assert(linear_logp_fwd_column_fold_merge_bytes(BM) <= linear_logp_fwd_stage_bytes(kElem, BM, BN, BK),
                  "a stage holds the fold's merge");
    unsigned char* const fold = smem + linear_logp_fwd_smem_bytes(kElem, BM, BN, BK, STAGES, true);
    // With KEEP, each tile gathers its logits' maxima before the fold and stores the kept values
    // as the fold goes; the fold's init barrier publishes the keep's. Without KEEP, keep is empty
    // (KeptColumnTiles takes 128-column tiles only, and the 256-column kernels keep nothing).
    typename conditional_type<KEEP, KeptColumnTiles<BiasT, Mainloop, BM>, NoKeptColumnTiles>::type keep;
    if constexpr (KEEP) keep.init(fold + linear_logp_fwd_column_fold_bytes(BM), tid);
    epilogue.init(fold, smem, args.targets, block.row0, args.n_rows, args.vocab_start, args.valid_local,
                  block.tiles.begin * BN, block.tiles.end * BN, tid);
    Mainloop mainloop;
    for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
      mainloop.clear();
      ring.template consume<T>(mainloop, at, k_slices, warp, lane);
      if constexpr (KEEP) {
        mainloop.finish();
        const FwdTileColumns<BiasT, Mainloop> columns(tile * BN, args.valid_local, args.bias, args.inv_temperature,
                                                      warp, lane);
        keep.gather_maxima(mainloop.acc, columns, args, block.row0, warp, lane);
        epilogue.fold_tile(mainloop, columns, args.inv_temperature, warp, lane,
                           [&](int g) { keep.store_group(g, mainloop.acc, columns, args, warp, lane); });
      } else {
        epilogue.consume_tile(mainloop, tile * BN, args.bias, args.inv_temperature, warp, lane);
      }
    }
  } else {
    epilogue.init(args.targets, block.row0, args.n_rows, args.vocab_start, args.valid_local, tid);
    if (Ring::template warpgroup_passes<Mainloop>(warp, block.rows, args.row_tiles)) {
      // A call of 64 rows or fewer: this warpgroup passes every slice of the block's tiles
      // (TmaRing::warpgroup_passes) and leaves out its fold too; its statistics stay empty and
      // are never stored.
      ring.pass(at, (block.tiles.end - block.tiles.begin) * k_slices, lane);
    } else {
      Mainloop mainloop;
      for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
        mainloop.clear();
        ring.template consume<T>(mainloop, at, k_slices, warp, lane);
        epilogue.consume_tile(mainloop, tile * BN, args.bias, args.inv_temperature, lane);
      }
    }
  }

  store_block_partials(epilogue, args, block, BM, tid, Ring::kComputeThreads);
  merge_row_tile_if_last<TargetT, ENTROPY>(args, block, tid, Ring::kComputeThreads);
}

template <class T, class BiasT, class TargetT, int BM, int BN, int BK, int STAGES, bool ENTROPY>
__global__ void __launch_bounds__(linear_logp_fwd_block_threads(true), 1)
    linear_logp_fwd_hopper(const __grid_constant__ LinearLogpFwdParams params) {
  extern __shared__ __align__(128) unsigned char linear_logp_fwd_hopper_smem[];
  linear_logp_fwd_hopper_body<T, BiasT, TargetT, BM, BN, BK, STAGES, ENTROPY, false, false>(
      params, linear_logp_fwd_hopper_smem);
}

// The forward in tiles of the rows as N: BM rows of X (136, 152 or 168) by BN = 128 or 256
// vocabulary columns; KEEP (BN = 128 only): keeping the backward's chunk in args.kept as well.
template <class T, class BiasT, class TargetT, int BM, int BN, int BK, int STAGES, bool ENTROPY, bool KEEP>
__global__ void __launch_bounds__(linear_logp_fwd_block_threads(true), 1)
    linear_logp_fwd_rows_as_n(const __grid_constant__ LinearLogpFwdParams params) {
  extern __shared__ __align__(128) unsigned char linear_logp_fwd_hopper_smem[];
  linear_logp_fwd_hopper_body<T, BiasT, TargetT, BM, BN, BK, STAGES, ENTROPY, true, KEEP>(
      params, linear_logp_fwd_hopper_smem);
}

}  // namespace kernels
}  // namespace shardjit
