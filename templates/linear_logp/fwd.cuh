// Fused forward of LinearLogp on one vocabulary shard: for BM-row tiles of X and ranges of the
// shard's BN-column vocabulary tiles, the per-row softmax partials (max, sum, entropy term,
// target logit) of z = (X W^T + b) * inv_temperature, without writing any logit to memory.
//
// Grid: args.schedule.blocks() blocks in x. A block works through the pieces its launch position
// gives it (linear_logp/fwd_schedule.cuh): usually one (row tile, vocabulary split) with the
// split's tiles, plus the empty partials of that split's other sources; in a cut last wave a
// lead or a round of parts. Each piece writes its partials to partials[source * n_rows + row],
// even when its range is empty. Every split but the last has the same length, so the blocks of a
// wave finish together and the row tiles of the next split start together, reading its W tiles
// in step (splits that differ by a tile ran ~2 % slower: docs/perf-notes.md). Block:
// linear_logp_fwd_threads, dynamic shared memory linear_logp_fwd_smem_bytes(sizeof(T), BM, BN, BK,
// STAGES, WGMMA).
//
// The K slices of all the block's tiles, across its pieces, form one cp.async stream through a
// STAGES-deep ring, so the first slices of the next tile are already in flight while the
// epilogue runs. The portable main loops hand each finished tile to the epilogue
// logit_chunk_cols(BM, BN) columns at a time through the shared-memory logit tile (LogpEpilogue);
// the Hopper loop's epilogue reads the accumulators in registers (LogpFragmentEpilogue).
#pragma once

#include "common/cp_async_tile.cuh"
#include "common/ptx.cuh"
#include "common/tile_order.cuh"
#include "common/types.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_epilogue.cuh"
#include "linear_logp/fwd_fragment_epilogue.cuh"
#include "linear_logp/fwd_layout.cuh"
#include "linear_logp/fwd_schedule.cuh"
#include "linear_logp/logit_block_shape.cuh"
#include "linear_logp/logit_mainloop.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, int H, int V_LOCAL, int V_VALID, int BM, int BN,
          int BK, int STAGES, bool WGMMA, bool ENTROPY>
__global__ void __launch_bounds__(linear_logp_fwd_threads, 1)
    linear_logp_fwd(const LinearLogpFwdArgs args) {
  static_assert(LogitBlockShape<H, V_LOCAL, V_VALID, BM, BN, BK, STAGES>::valid, "the block shape is checked there");

  constexpr int kThreads = linear_logp_fwd_threads;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kKSlices = (H + BK - 1) / BK;
  constexpr int kVocabTiles = static_cast<int>((static_cast<long long>(V_VALID) + BN - 1) / BN);
  // Blocks of more than 16384 accumulators (64 x 64 a warp) have no registers left for a
  // pointer per copied chunk.
  constexpr bool kStridedCopy = BM * BN > 16384;
  // The blocks of a split's row tiles read each W tile at about the same time and never again,
  // while each reads its X tile once per vocabulary tile: W goes in as the first to evict, so
  // that it does not push the X tiles out of L2 between their reads (docs/perf-notes.md).
  using XCopy = typename CpAsyncTileFor<T, BM, BK, H, kThreads, kStridedCopy>::type;
  using WCopy = typename CpAsyncTileFor<T, BN, BK, H, kThreads, kStridedCopy, L2Priority::kEvictFirst>::type;
  using Mainloop = typename LogitMainloop<T, BM, BN, BK, STAGES, WGMMA>::type;
  using Epilogue = typename conditional_type<WGMMA, LogpFragmentEpilogue<BiasT, TargetT, V_VALID, ENTROPY, Mainloop>,
                                             LogpEpilogue<BiasT, TargetT, BM, BN, V_VALID, ENTROPY, kThreads>>::type;

  extern __shared__ __align__(128) unsigned char linear_logp_fwd_smem[];
  T* const ring = reinterpret_cast<T*>(linear_logp_fwd_smem);
  Epilogue epilogue(linear_logp_fwd_smem + linear_logp_fwd_ring_bytes(kElem, BM, BN, BK, STAGES));
  constexpr int kStageElems = (BM + BN) * BK;
  if constexpr (WGMMA) wgmma_check_alignment(ring);

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  // The splits walk this shard's tiles: a TP rank's plan counts the widest shard's, and a narrower
  // shard's last splits come out shorter or empty.
  FwdSchedule schedule = args.schedule;
  schedule.vocab_tiles = kVocabTiles;
  const int block = static_cast<int>(blockIdx.x);
  const int pieces = fwd_block_pieces(schedule, block);
  if (pieces == 0) return;  // a plan never launches such a block (tests/ops); nothing to write
  const T* const x = static_cast<const T*>(args.hidden);
  const T* const w = static_cast<const T*>(args.weight);

  // Producer: its position in the (piece, tile, K slice) stream, and the ring slot it fills next.
  XCopy x_copy;
  WCopy w_copy;
  int load_piece = 0;
  FwdPiece loading = fwd_block_piece(schedule, block, 0);
  int load_tile = loading.tile_begin;
  int load_slice = 0;
  int load_slot = 0;
  x_copy.set_rows(x, args.hidden_stride, static_cast<long long>(loading.row_tile) * BM, args.n_rows, tid);
  // Moves past pieces without tiles (left) to the next one that has some.
  auto seek_tiles = [&]() {
    while (load_tile >= loading.tile_end && load_piece + 1 < pieces) {
      loading = fwd_block_piece(schedule, block, ++load_piece);
      load_tile = loading.tile_begin;
      if (load_tile < loading.tile_end) {
        x_copy.set_rows(x, args.hidden_stride, static_cast<long long>(loading.row_tile) * BM, args.n_rows, tid);
      }
    }
  };
  seek_tiles();
  // Always commits, even past the end of the stream, so that the group count stays in step
  // with the consumer's cp_async_wait_group.
  auto load_next = [&]() {
    if (load_tile < loading.tile_end) {
      if (load_slice == 0) {
        w_copy.set_rows(w, args.weight_stride, static_cast<long long>(load_tile) * BN, V_VALID, tid);
      }
      const unsigned int slot = smem_addr(ring + load_slot * kStageElems);
      const int k0 = load_slice * BK;
      x_copy.issue(slot, k0);
      w_copy.issue(slot + BM * BK * kElem, k0);
      if (++load_slice == kKSlices) {
        load_slice = 0;
        ++load_tile;
        seek_tiles();
      }
      load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
    }
    cp_async_commit_group();
  };

#pragma unroll
  for (int s = 0; s < ring_prefetch_slices<Mainloop, STAGES>(); ++s) load_next();

  Mainloop mainloop;
  int read_slot = 0;
  for (int i = 0; i < pieces; ++i) {
    const FwdPiece piece = fwd_block_piece(schedule, block, i);
    const long long row0 = static_cast<long long>(piece.row_tile) * BM;
    const long long rows_left = args.n_rows - row0;
    const int rows = rows_left < BM ? static_cast<int>(rows_left) : BM;
    // The shared-memory epilogue's statistics: every thread has read the last piece's (store)
    // before any writes this piece's. Its init is published to the other warps by the first
    // K-loop barrier, or, for a piece without tiles, by the barrier that opens store.
    if (i > 0) __syncthreads();
    epilogue.init(args.targets, row0, args.n_rows, args.vocab_start, tid);
    for (int tile = piece.tile_begin; tile < piece.tile_end; ++tile) {
      mainloop.clear();
#pragma unroll 1
      for (int slice = 0; slice < kKSlices; ++slice) {
        // Makes every thread's copies of this slot visible, and frees the slot that the refill
        // issued during compute fills.
        wait_for_slice<Mainloop, STAGES>();
        const T* const slot = ring + read_slot * kStageElems;
        mainloop.compute(slot, slot + BM * BK, warp, lane, load_next);
        read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
      }
      epilogue.consume_tile(mainloop, tile * BN, rows, args.bias, args.inv_temperature, warp, lane);
    }
    epilogue.store(args.partials + static_cast<long long>(piece.source) * args.n_rows, row0, args.n_rows, tid);
  }
  cp_async_wait_group<0>();
}

}  // namespace kernels
}  // namespace shardjit
