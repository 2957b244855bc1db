// Fused forward of LinearLogp on one vocabulary shard: for a BM-row tile of X and a split of the
// shard's BN-column vocabulary tiles (or a piece of one), the per-row softmax partials (max, sum,
// entropy term, target logit) of z = (X W^T + b) * inv_temperature, without writing any logit to
// memory.
//
// Grid: one block per unit or piece of LinearLogpFwdArgs. fwd_block_work and fwd_block_tiles
// (linear_logp/fwd_block_order.cuh) give a block its row tile and its range of the V =
// ceil(V_VALID / BN) vocabulary tiles: split s's [s P, min((s + 1) P, V)), P = ceil(V / S), or
// piece c of it. The block writes partials[source * n_rows + row] with source = s * unit_pieces
// + c (c = 0 for a whole unit, which also writes empty partials to its split's other sources),
// even when its range is empty (fwd_block.cuh). Every split but the last has the same
// length, so the blocks of a wave finish together and the row tiles of the next split start
// together, reading its W tiles in step (splits that differ by a tile, [s V / S, (s + 1) V / S),
// ran ~2 % slower: docs/perf-notes.md, "Splits and block order").
//
// The K slices of all the block's tiles form one stream through a STAGES-deep ring, so the first
// slices of the next tile are already in flight while the epilogue runs. This file holds the
// portable main loops (mma.sync, or fp32 FMA), fed by cp.async from every thread, which hand
// each finished tile to the epilogue logit_chunk_cols(BM, BN) columns at a time through the
// shared-memory logit tile (LogpEpilogue); they are specialized for the shape (H, V_LOCAL,
// V_VALID). On sm_90a with 16-bit inputs the op runs the Hopper loop instead, a kernel of its
// own that takes the shape at run time (linear_logp_fwd_hopper, fwd_hopper.cuh). Block:
// linear_logp_fwd_block_threads(false), dynamic shared memory
// linear_logp_fwd_smem_bytes(sizeof(T), BM, BN, BK, STAGES, false).
#pragma once

#include "common/cp_async_tile.cuh"
#include "common/ptx.cuh"
#include "common/tile_order.cuh"
#include "common/types.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block.cuh"
#include "linear_logp/fwd_epilogue.cuh"
#include "linear_logp/fwd_layout.cuh"
#include "linear_logp/logit_block_shape.cuh"
#include "linear_logp/logit_mainloop.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, int H, int V_LOCAL, int V_VALID, int BM, int BN, int BK, int STAGES,
          bool ENTROPY>
__global__ void __launch_bounds__(linear_logp_fwd_block_threads(false), 1)
    linear_logp_fwd(const __grid_constant__ LinearLogpFwdParams params) {
  static_assert(LogitBlockShape<H, V_LOCAL, V_VALID, BM, BN, BK, STAGES>::valid, "the block shape is checked there");
  extern __shared__ __align__(128) unsigned char linear_logp_fwd_smem[];
  unsigned char* const smem = linear_logp_fwd_smem;
  const LinearLogpFwdArgs& args = params.args;
  constexpr int kThreads = linear_logp_fwd_threads;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kKSlices = (H + BK - 1) / BK;
  constexpr int kVocabTiles = static_cast<int>((static_cast<long long>(V_VALID) + BN - 1) / BN);
  // Blocks of more than 16384 accumulators (64 x 64 a warp) have no registers left for a
  // pointer per copied chunk.
  constexpr bool kStridedCopy = BM * BN > 16384;
  // The blocks of a split's row tiles read each W tile at about the same time and never again,
  // while each reads its X tile once per vocabulary tile: W goes in as the first to evict, so
  // that it does not push the X tiles out of L2 between their reads (docs/perf-notes.md, "Splits and block order").
  using XCopy = typename CpAsyncTileFor<T, BM, BK, H, kThreads, kStridedCopy>::type;
  using WCopy = typename CpAsyncTileFor<T, BN, BK, H, kThreads, kStridedCopy, L2Priority::kEvictFirst>::type;
  using Mainloop = typename LogitMainloop<T, BM, BN, BK>::type;
  using Epilogue = LogpEpilogue<BiasT, TargetT, BM, BN, V_VALID, ENTROPY, kThreads>;

  T* const ring = reinterpret_cast<T*>(smem);
  Epilogue epilogue(smem + linear_logp_fwd_ring_bytes(kElem, BM, BN, BK, STAGES));
  constexpr int kStageElems = (BM + BN) * BK;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const FwdBlock block = fwd_block<BM>(args, kVocabTiles);

  // Published to the other warps by the first K-loop barrier, or, for an empty split, by the
  // barrier before the store.
  epilogue.init(args.targets, block.row0, args.n_rows, args.vocab_start, tid);

  const T* const w = static_cast<const T*>(args.weight);
  XCopy x_copy;
  x_copy.set_rows(static_cast<const T*>(args.hidden), args.hidden_stride, block.row0, args.n_rows, tid);
  WCopy w_copy;
  // Producer position in the (tile, K slice) stream, and the ring slot it fills next.
  int load_tile = block.tiles.begin;
  int load_slice = 0;
  int load_slot = 0;
  // Always commits, even past the end of the stream, so that the group count stays in step
  // with the consumer's cp_async_wait_group.
  auto load_next = [&]() {
    if (load_tile < block.tiles.end) {
      if (load_slice == 0) {
        w_copy.set_rows(w, args.weight_stride, static_cast<long long>(load_tile) * BN, V_VALID,
                        tid);
      }
      const unsigned int slot = smem_addr(ring + load_slot * kStageElems);
      const int k0 = load_slice * BK;
      x_copy.issue(slot, k0);
      w_copy.issue(slot + BM * BK * kElem, k0);
      if (++load_slice == kKSlices) {
        load_slice = 0;
        ++load_tile;
      }
      load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
    }
    cp_async_commit_group();
  };

#pragma unroll
  for (int s = 0; s < ring_prefetch_slices<Mainloop, STAGES>(); ++s) load_next();

  Mainloop mainloop;
  int read_slot = 0;
  for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
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
    epilogue.consume_tile(mainloop, tile * BN, block.rows, args.bias, args.inv_temperature, warp, lane);
  }
  cp_async_wait_group<0>();

  store_block_partials(epilogue, args, block, BM, tid, kThreads);
}

}  // namespace kernels
}  // namespace shardjit
