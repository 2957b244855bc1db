// The GEMM's Hopper tile (templates/gemm/gemm.cuh with TMA): 128 x 256 x 64 tiles of 16-bit
// operands, copied by TMA from a producer warp into the ring of templates/common/tma_ring.cuh and
// multiplied by the two warpgroups of the wgmma loop.
//
// The TMA boxes (templates/common/operand_layout.cuh, kMNContiguousBlocks) write M / N
// contiguous operands as 64-wide column blocks of 64 K rows (128-byte swizzle, boxes of 128
// bytes a row), K contiguous ones as 128-byte rows: what wgmma reads. Boxes past the tensors'
// extents arrive as zeros, so columns past a_cols and rows of B past b_rows read as zeros as in
// the cp.async copiers; so do rows past m, except that the last row tile of an A [m][k], where it
// has fewer rows than the tile, is read in boxes of its rows rounded up to 8 (a_tail_map,
// common/row_tile_box.cuh), the stage's other rows stale: wgmma keeps accumulator rows apart, and
// rows past m are never stored. In a call of one row tile, a warpgroup whose 64 rows of a tile all
// lie past m issues no products for it (TmaRing::consume_rows).
//
// An addend (grad_hidden's fp32 accumulator over vocabulary chunks, an accumulated grad_weight)
// comes into the ring after a whole tile's K slices, where the host could describe it to TMA
// (templates/gemm/gemm_staged_addend.cuh); the epilogue reads it there. A 16-bit tile goes out
// through a staging area after the ring's mbarriers (GemmEpilogue::write_tile): TMA stores of
// its boxes write it while the block goes on to its next tile, and the block waits for their
// reads only before it stages again or exits. An fp32 tile is stored from the registers.
//
// A block takes one tile of the grouped order, or, as the host chooses for short tiles, walks
// tiles b, b + grid, ... persistently; a grid whose last wave would leave many blocks idle is
// split along K instead, its last wave's tiles (or all of them) a run of slices a block
// (templates/common/stream_k.cuh). The producer walks the block's
// segments ahead of the compute warps through one ring.
//
// ROWS_AS_N: the tile is BM output rows (a multiple of 32 up to 256) by 128 output columns, the
// rows as wgmma's N: wgmma's A is B's 128 columns (two 64-column boxes, read M contiguous) and its
// B is A's BM rows (K contiguous, in boxes of BM rows or of the last tile's), so a product of a few
// hundred rows is covered by tiles of about its rows instead of 128-row tiles padded past them, and
// by twice as many column tiles (grad_hidden at 333 rows: 2 x 192 rows, not 3 x 128;
// docs/perf-notes.md, "GEMM tiles of the rows as N"). Such a tile is stored from the registers, its
// fragment's rows being the output's columns (GemmEpilogue::store_tile_rows_as_n), with its addend
// from global memory. Its plans cut every tile into the same runs of K, so that the blocks that run
// at once read the same K slices of A and B, and run its row tiles in clusters (plan_rows_as_n,
// common/stream_k.cuh) whose blocks share B's two boxes a slice as below.
//
// A plan split whole over a few row tiles, or over the row tiles of a grid of less than a wave,
// may run in clusters of consecutive row tiles, all of them or a divisor of them (plan.cluster,
// cluster_stream_k; never with a slice filter, whose slices differ between row tiles): the blocks
// of a cluster compute the same K slices of one column, each in its row tile, so they read the
// same B slice. Each copies every cluster-th of its 64-column boxes into every block's stage at once
// (multicast), so B comes from L2 or memory once for the cluster, and the rings, which free a
// stage only once every block is done with it (common/tma_ring.cuh), keep the blocks in step.
#pragma once

#include "common/row_tile_box.cuh"
#include "common/stream_k.cuh"
#include "common/stream_k_fixup.cuh"
#include "common/tile_order.cuh"
#include "common/tma_ring.cuh"
#include "gemm/gemm_args.cuh"
#include "gemm/gemm_epilogue.cuh"
#include "gemm/gemm_layout.cuh"
#include "gemm/gemm_staged_addend.cuh"

namespace shardjit {
namespace kernels {

// The main loop of the tile: 128 x 256 with A's rows as wgmma's M, or (ROWS_AS_N) B's 128
// columns as wgmma's M and A's BM rows as its N.
template <class TA, bool A_TRANS, int BM, bool ROWS_AS_N>
struct GemmTmaMainloop {
  using type = WgmmaTileMainloop<TA, 128, 256, 64, 1,
                                 A_TRANS ? MmaOperand::kMNContiguousBlocks : MmaOperand::kKContiguous,
                                 MmaOperand::kMNContiguousBlocks>;
};
template <class TA, int BM>
struct GemmTmaMainloop<TA, false, BM, true> {
  using type = WgmmaTileMainloop<TA, 128, BM, 64, 1, MmaOperand::kMNContiguousBlocks, MmaOperand::kKContiguous>;
};

template <class TA, class OutT, class AddT, bool A_TRANS, int STAGES, int BM, bool ROWS_AS_N, class NextSlice>
__device__ __forceinline__ void gemm_tma(const GemmParams& params, unsigned char* smem, NextSlice&& next_slice) {
  static_assert(ROWS_AS_N ? !A_TRANS && BM % 32 == 0 && BM >= 32 && BM <= 256 : BM == 128,
                "the TMA loop's tiles: 128 x 256, or BM x 128 of an A [m][k] with the rows as N");
  // The output tile: kBM rows by kBN columns.
  constexpr int kBM = BM;
  constexpr int kBN = ROWS_AS_N ? 128 : 256;
  constexpr int kBK = 64;
  constexpr int kBox = 64;                                 // a box is 64 elements (128 bytes) wide
  constexpr unsigned int kBlockBytes = kBK * kBox * 2;     // one 64 x 64 box
  // wgmma's A tile, 128 x 64 (A's rows, or ROWS_AS_N B's columns), first in a stage; its B tile
  // (B's 256 columns, or ROWS_AS_N A's kBM rows) after it.
  constexpr unsigned int kWgmmaABytes = 128 * kBK * 2;
  constexpr unsigned int kStageBytes = kWgmmaABytes + (ROWS_AS_N ? kBM : kBN) * kBK * 2;
  using Ring = TmaRing<STAGES, kStageBytes, kWgmmaABytes, true>;
  using Mainloop = typename GemmTmaMainloop<TA, A_TRANS, BM, ROWS_AS_N>::type;
  using Fixup = StreamKFixup<Mainloop::kAccumulators, Ring::kComputeThreads>;
  // The staged addend of the 128 x 256 tile (ROWS_AS_N tiles read theirs from global memory).
  using Addend = StagedAddend<AddT, 128, 256, kWgmmaABytes + 256 * kBK * 2>;
  static_assert(Addend::kStages <= STAGES, "the addend's stages are all held at once by the epilogue");
  using Epilogue = GemmEpilogue<OutT, AddT>;
  if constexpr (gemm_tma_stages_output(sizeof(OutT), ROWS_AS_N)) {
    static_assert(Epilogue::template TileStore<Mainloop>::kBytes <= kFragmentStagingBytes,
                  "the host sizes the staging area (gemm/gemm_layout.cuh)");
  }
  const GemmArgs& args = params.args;
  const StreamKPlan& plan = params.split;
  // Whole tiles take their addend through the ring; the pieces of a split tile do not know which
  // of them finishes it, and the one that does reads it from global memory.
  auto stages_addend = [&](const TileSegment& segment) {
    return !ROWS_AS_N && params.stage_addend != 0 && stream_k_whole(plan, segment);
  };
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const Ring ring(smem, static_cast<unsigned int>(plan.cluster));
  const int cluster = static_cast<int>(ring.cluster_blocks);
  const int rank = cluster > 1 ? static_cast<int>(cluster_block_rank()) : 0;
  const int tiles_m = static_cast<int>((args.m + kBM - 1) / kBM);
  const int tiles_n = static_cast<int>((args.n + kBN - 1) / kBN);
  // The corner (m0, n0) of the segment's tile: in the grouped order, or for a plan split whole
  // row after row (templates/common/stream_k.cuh says why).
  auto corner = [&](const TileSegment& segment, int& m0, int& n0) {
    const TileIndex tile = stream_k_split_whole(plan) ? row_major_tile_index(segment.tile, tiles_n)
                                            : grouped_tile_index(segment.tile, tiles_m, tiles_n, kTileGroupRows);
    m0 = tile.m * kBM;
    n0 = tile.n * kBN;
  };
  ring.init(tid);

  if (Ring::in_producer_warpgroup(warp)) {
    Ring::enter_producer();
    if (!Ring::is_producer(warp)) {
      ring.exit();
      return;
    }
    TmaRingCursor<STAGES> at;
    for_each_segment(plan, [&](const TileSegment& segment) {
      int m0, n0;
      corner(segment, m0, n0);
      // A [m][k]'s box (short in a shorter last row tile) and a slice's bytes: A's box and B's.
      const RowTileBox a_box = row_tile_box<kBM>(params.a_map, params.a_tail_map, params.a_tail_box_rows, args.m - m0);
      const unsigned int slice_bytes = A_TRANS ? kStageBytes
                                               : static_cast<unsigned int>(a_box.rows) * kBK * 2 +
                                                     (ROWS_AS_N ? kWgmmaABytes : kBK * kBN * 2);
      // Lane 0 issues; the whole warp walks the loop so that it can ask L2 for the addend tile
      // together, kGemmAddendPrefetchSlices slices before the compute warps finish (the producer
      // runs about STAGES slices ahead of them).
      const int prefetch_at = segment.end - kGemmAddendPrefetchSlices + STAGES;
      bool prefetched = args.addend == nullptr;
      for (int slice = next_slice(m0, segment.begin, segment.end); slice < segment.end;
           slice = next_slice(m0, slice + 1, segment.end)) {
        if (!prefetched && slice >= prefetch_at) {
          gemm_prefetch_addend<AddT, kBM, kBN, 32>(args, m0, n0, lane);
          prefetched = true;
        }
        if (lane == 0) {
          const int k0 = slice * kBK;
          ring.produce(
              at,
              [&](unsigned int dst, unsigned int full) {
                // B [k][n]: `boxes` 64-column blocks from the tile's column n0 at `base` (wgmma's A
                // tile, or its B tile); in a cluster this block's share of them, into every
                // block's stage.
                auto load_b = [&](unsigned int base, int boxes) {
                  if (cluster > 1) {
                    const auto blocks = static_cast<unsigned short>((1u << cluster) - 1u);
                    for (int j = rank; j < boxes; j += cluster) {
                      tma_load_2d_multicast(base + j * kBlockBytes, &params.b_map, n0 + j * kBox, k0, full, blocks);
                    }
                  } else {
#pragma unroll
                    for (int j = 0; j < boxes; ++j) {
                      tma_load_2d(base + j * kBlockBytes, &params.b_map, n0 + j * kBox, k0, full);
                    }
                  }
                };
                if constexpr (ROWS_AS_N) {
                  // B's 128 columns are wgmma's A; A [m][k], a_box.rows rows of 128 bytes, its B.
                  load_b(dst, 2);
                  tma_load_2d(dst + kWgmmaABytes, a_box.map, k0, m0, full);
                } else {
                  if constexpr (A_TRANS) {
                    // A^T [k][m]: two 64-column blocks of the tile's 128 M indices.
                    tma_load_2d(dst, &params.a_map, m0, k0, full);
                    tma_load_2d(dst + kBlockBytes, &params.a_map, m0 + kBox, k0, full);
                  } else {
                    tma_load_2d(dst, a_box.map, k0, m0, full);  // A [m][k]: a_box.rows rows of 128 bytes
                  }
                  load_b(dst + kWgmmaABytes, kBN / kBox);
                }
              },
              slice_bytes);
        }
        __syncwarp();
        at.advance();
      }
      if (!prefetched) {
        gemm_prefetch_addend<AddT, kBM, kBN, 32>(args, m0, n0, lane);
      }
      if (stages_addend(segment)) {
        for (int s = 0; s < Addend::kStages; ++s) {
          if (lane == 0) {
            ring.produce(
                at,
                [&](unsigned int dst, unsigned int full) {
                  Addend::load_stage(s, dst, &params.addend_map, m0, n0, full);
                },
                Addend::stage_bytes(s));
          }
          __syncwarp();
          at.advance();
        }
      }
    });
    ring.exit();
    return;
  }
  Ring::enter_compute();

  // For a 16-bit output (the host sizes shared memory by the output's type).
  constexpr int kElem = static_cast<int>(sizeof(TA));
  unsigned char* const staging = smem + gemm_tma_staging_offset(kElem, kElem, kBM, kBN, kBK, STAGES);
  TmaRingCursor<STAGES> at;
  for_each_segment(plan, [&](const TileSegment& segment) {
    int m0, n0;
    corner(segment, m0, n0);
    // The compute warps need only how many slices arrive: counted before the loop, so that no
    // mask read sits among its wgmma (ptxas would serialize them, C7515).
    int count = 0;
    for (int slice = next_slice(m0, segment.begin, segment.end); slice < segment.end;
         slice = next_slice(m0, slice + 1, segment.end)) {
      ++count;
    }
    // The rows of wgmma's M that exist (the tile's rows, or ROWS_AS_N its columns): the last row
    // tile of a call may hold fewer than a warpgroup's.
    const long long extent = ROWS_AS_N ? args.n - n0 : args.m - m0;
    const int rows = extent < 128 ? static_cast<int>(extent) : 128;
    const int row_tiles = static_cast<int>(((ROWS_AS_N ? args.n : args.m) + 127) / 128);  // the call's
    Mainloop mainloop;
    mainloop.clear();
    ring.template consume_rows<TA>(mainloop, at, count, rows, row_tiles, warp, lane);
    if constexpr (ROWS_AS_N) {
      if (Fixup::finish(plan, segment, mainloop.acc, tid, Mainloop::holds_rows(warp, lane, rows))) {
        Epilogue::of(args).store_tile_rows_as_n(mainloop, m0, n0, warp, lane);
      }
    } else if (stages_addend(segment)) {
      Addend addend;
      TmaRingCursor<STAGES> stage_at = at;
#pragma unroll
      for (int s = 0; s < Addend::kStages; ++s, stage_at.advance()) addend.stage[s] = ring.acquire(stage_at);
      Epilogue::of(args).write_tile(
          mainloop, staging, &params.out_map, m0, n0, warp, lane,
          [&](int i, const AccumulatorPair& p, long long, long long) {
            const int group_col = Mainloop::pair_group_col(i);
            return addend.pair(p.row, group_col, p.col - group_col);
          });
#pragma unroll
      for (int s = 0; s < Addend::kStages; ++s, at.advance()) ring.release(at, lane);
    } else if (Fixup::finish(plan, segment, mainloop.acc, tid, Mainloop::holds_rows(warp, lane, rows))) {
      Epilogue::of(args).write_tile(mainloop, staging, &params.out_map, m0, n0, warp, lane);
    }
  });
  // The last tile's stores must have read the staging area before the block's shared memory goes.
  if constexpr (gemm_tma_stages_output(sizeof(OutT), ROWS_AS_N)) {
    Epilogue::template TileStore<Mainloop>::wait_reads(lane);
  }
  ring.exit();
}

}  // namespace kernels
}  // namespace shardjit
