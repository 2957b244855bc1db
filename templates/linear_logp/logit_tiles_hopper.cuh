// The walk of a vocabulary chunk's logit tiles on the Hopper loop, shared by the dZ kernel
// (bwd_dz_hopper.cuh) and the kept chunk's forward (fwd_keep.cuh), which differ in their
// epilogue: persistent blocks of two compute warpgroups and a producer warp. Block b of G takes
// tiles b, b + G, ... of the grouped order, so the running tiles stay one stretch of it, and the
// producer walks the K slices of all of them through one TMA ring (templates/common/tma_ring.cuh):
// while the compute warps turn a finished tile into its output and store it, the ring already
// loads the next tile's slices, and the stores (TMA box stores, or bulk copies for fp32, from the
// epilogue's own staging area) run under the next tile's products. A grid whose last wave would
// leave many blocks idle splits that wave's tiles (or all of them) along K instead, a run of
// slices a block (templates/common/stream_k.cuh); the piece of a tile that arrives last merges
// the pieces' sums and writes the tile.
//
// Nothing here depends on the model's shape: the K slices come from the stream-K plan, H and the
// shard's valid rows from the TMA maps, the columns with logits from args.valid_local. The
// kernels built on it are therefore compiled once per dtype and option set, not per shape.
//
// A last row tile of fewer rows than BM reads X in place in boxes of its rows rounded up to 8
// (common/row_tile_box.cuh); the stage's rows past the box hold stale shared memory. wgmma keeps
// accumulator rows apart, so they reach only rows past n_rows, which the epilogues neither store
// nor count: the dZ epilogue zeroes every column of a row without a target (bwd_row) before its
// tile max, and the kept chunk's partials and stores are a row's own. For the same reason, in a
// call of one row tile, a warpgroup whose 64 rows all lie past n_rows issues no products
// (TmaRing::consume_rows).
//
// The epilogue (DzFragmentEpilogue, or KeptLogitsEpilogue for the kept chunk) names its main loop
// (Loop), its output element (Out), whether it filters tiles (kFilter), and takes a finished tile
// (init, consume_tile, store_zero_tile, wait_stores).
//
// Shared memory (linear_logp_bwd_dz_smem_bytes): the ring, its mbarriers, the epilogue's region
// (two tile max), its staging area.
#pragma once

#include "common/fragment_store_layout.cuh"
#include "common/ptx_memory.cuh"
#include "common/row_tile_box.cuh"
#include "common/stream_k.cuh"
#include "common/stream_k_fixup.cuh"
#include "common/tma_ring.cuh"
#include "common/types.cuh"
#include "common/wgmma_mainloop.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/bwd_dz_tile.cuh"

namespace shardjit {
namespace kernels {

template <class T, class Epilogue, int BM, int BN, int BK, int STAGES>
__device__ __forceinline__ void logit_tiles_hopper(const LinearLogpBwdDzParams& params, unsigned char* smem) {
  using Mainloop = typename Epilogue::Loop;
  static_assert(is_same_type<Mainloop, WgmmaTileMainloop<T, BM, BN, BK, 1>>::value, "the epilogue takes this loop");
  constexpr bool FILTER = Epilogue::kFilter;
  using Tile = DzTile<typename Epilogue::Out, BM, BN, FILTER>;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kRegion = linear_logp_bwd_dz_region_offset(kElem, BM, BN, BK, STAGES, true);
  static_assert(Epilogue::kRegionBytes == linear_logp_bwd_dz_hopper_region_bytes &&
                    Epilogue::kStagingBytes <= kFragmentStagingBytes,
                "the host sizes the epilogue's shared memory (templates/linear_logp/bwd_dz_layout.cuh)");
  using Ring = TmaRing<STAGES, (BM + BN) * BK * kElem, BM * BK * kElem>;

  using Fixup = StreamKFixup<Mainloop::kAccumulators, Ring::kComputeThreads>;

  const LinearLogpBwdDzArgs& args = params.args;
  const StreamKPlan& plan = params.split;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int row_tiles = static_cast<int>((args.n_rows + BM - 1) / BM);
  const int col_tiles = (args.chunk_cols + BN - 1) / BN;
  wgmma_check_alignment(smem);
  const Ring ring(smem);
  ring.init(tid);

  if (Ring::in_producer_warpgroup(warp)) {
    Ring::enter_producer();
    if (!Ring::is_producer(warp)) return;
    if (lane == 0) {
      TmaRingCursor<STAGES> at;
      for_each_segment(plan, [&](const TileSegment& segment) {
        const Tile tile(args, segment.tile, row_tiles, col_tiles);
        if (tile.n0 >= args.valid_local) return;  // no products: see below
        // X's box (of the tile's rows rounded up to 8 where they are fewer than BM) and W's.
        const RowTileBox x =
            row_tile_box<BM>(params.x_map, params.x_tail_map, params.x_tail_box_rows, tile.rows);
        const unsigned int slice_bytes = static_cast<unsigned int>((x.rows + BN) * BK * kElem);
        for (int slice = segment.begin; slice < segment.end; ++slice) {
          ring.produce(
              at,
              [&](unsigned int dst, unsigned int full) {
                tma_load_2d(dst, x.map, slice * BK, static_cast<int>(tile.row0), full);
                tma_load_2d(dst + BM * BK * kElem, &params.w_map, slice * BK, tile.n0, full);
              },
              slice_bytes);
          at.advance();
        }
      });
    }
    return;
  }
  Ring::enter_compute();

  Epilogue epilogue(smem + linear_logp_bwd_dz_staging_offset(kElem, BM, BN, BK, STAGES), smem + kRegion, &params.dz_map);
  TmaRingCursor<STAGES> at;
  // Segments with products so far: their count picks the tile max (two in turn; init). Tiles of
  // padding are not counted, since no barrier separates them from their neighbours.
  int computed = 0;
  for_each_segment(plan, [&](const TileSegment& segment) {
    // A tile wholly in the padding (or past the shard) has no logits to compute; its first
    // piece writes it.
    if (const Tile tile(args, segment.tile, row_tiles, col_tiles); tile.n0 >= args.valid_local) {
      if (segment.begin == 0) {
        epilogue.store_zero_tile(tile.c0, tile.row0, tile.rows, args, tile.out, warp, lane);
        if (FILTER && tid == 0) *tile.mask = 0;
      }
      return;
    } else {
      epilogue.init(args, tile.row0, tid, computed++);
    }
    if constexpr (FILTER) bar_sync(1, Ring::kComputeThreads);  // publishes the cleared tile max
    Mainloop mainloop;
    mainloop.clear();
    ring.template consume_rows<T>(mainloop, at, segment.end - segment.begin,
                                  Tile(args, segment.tile, row_tiles, col_tiles).rows, row_tiles, warp, lane);
    // Placed again rather than kept across the main loop, whose registers are all taken.
    const Tile tile(args, segment.tile, row_tiles, col_tiles);
    if (!Fixup::finish(plan, segment, mainloop.acc, tid, Mainloop::holds_rows(warp, lane, tile.rows))) return;
    const bool keep =
        epilogue.consume_tile(mainloop, tile.n0, tile.c0, tile.row0, tile.rows, args, tile.out, warp, lane);
    if (FILTER && tid == 0) *tile.mask = keep ? 1 : 0;
  });
  // The last stores' copies must have read the staging area before the block's shared memory goes.
  Epilogue::wait_stores(lane);
}

}  // namespace kernels
}  // namespace shardjit
