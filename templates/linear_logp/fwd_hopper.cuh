// The forward on the Hopper loop (templates/linear_logp/fwd.cuh with WGMMA): two compute
// warpgroups and a producer warp. The block takes the same unit or piece as on the portable
// loops (fwd_block_order.cuh), and its producer walks the K slices of all the block's tiles
// through one TMA ring (templates/common/tma_ring.cuh), so that while the compute warps fold a
// finished tile, the ring already fills with the next tile's slices.
//
// Why not the cp.async ring of the portable loops: there every compute thread issues its share
// of each slice's copies and the block meets at a barrier every slice, ~110 instructions a warp
// a slice of which 4 are products; here the compute warps issue their wgmma and their waits, and
// the forward draws as little power a product as the backward's TMA-fed kernels
// (docs/perf-notes.md, "Why the forward is tiled this way").
//
// W is read with an evict-first L2 policy, as on the portable loops: the row tiles of a split
// read each W tile at about the same time and never again, and X, read once per vocabulary
// tile, should stay.
//
// Shared memory (linear_logp_fwd_smem_bytes): the ring, then its mbarriers; the epilogue works
// on the accumulators in registers (LogpFragmentEpilogue).
#pragma once

#include "common/ptx.cuh"
#include "common/tma_ring.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block.cuh"
#include "linear_logp/fwd_fragment_epilogue.cuh"

namespace shardjit {
namespace kernels {

template <class T, class BiasT, class TargetT, int H, int V_VALID, int BM, int BN, int BK, int STAGES, bool ENTROPY>
__device__ __forceinline__ void linear_logp_fwd_hopper(const LinearLogpFwdParams& params, unsigned char* smem) {
  using Mainloop = WgmmaTileMainloop<T, BM, BN, BK, 1>;
  using Epilogue = LogpFragmentEpilogue<BiasT, TargetT, V_VALID, ENTROPY, Mainloop>;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kKSlices = (H + BK - 1) / BK;
  constexpr int kVocabTiles = static_cast<int>((static_cast<long long>(V_VALID) + BN - 1) / BN);
  using Ring = TmaRing<STAGES, (BM + BN) * BK * kElem, BM * BK * kElem>;

  const LinearLogpFwdArgs& args = params.args;
  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const FwdBlock block = fwd_block<BM, kVocabTiles>(args);
  wgmma_check_alignment(smem);
  const Ring ring(smem);
  ring.init(tid);

  if (Ring::in_producer_warpgroup(warp)) {
    Ring::enter_producer();
    if (!Ring::is_producer(warp)) return;
    if (lane == 0) {
      const unsigned long long w_policy = l2_policy<L2Priority::kEvictFirst>();
      TmaRingCursor<STAGES> at;
      for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
        for (int slice = 0; slice < kKSlices; ++slice) {
          // Rows past n_rows, columns past V_VALID and K past H come in as zeros.
          ring.produce(at, [&](unsigned int dst, unsigned int full) {
            tma_load_2d(dst, &params.x_map, slice * BK, static_cast<int>(block.row0), full);
            tma_load_2d_hint(dst + BM * BK * kElem, &params.w_map, slice * BK, tile * BN, full, w_policy);
          });
          at.advance();
        }
      }
    }
    return;
  }
  Ring::enter_compute();

  Epilogue epilogue(nullptr);
  epilogue.init(args.targets, block.row0, args.n_rows, args.vocab_start, tid);
  TmaRingCursor<STAGES> at;
  Mainloop mainloop;
  for (int tile = block.tiles.begin; tile < block.tiles.end; ++tile) {
    mainloop.clear();
    ring.template consume<T>(mainloop, at, kKSlices, warp, lane);
    epilogue.consume_tile(mainloop, tile * BN, block.rows, args.bias, args.inv_temperature, warp, lane);
  }

  store_block_partials(epilogue, args, block, BM, tid, Ring::kComputeThreads);
}

}  // namespace kernels
}  // namespace shardjit
