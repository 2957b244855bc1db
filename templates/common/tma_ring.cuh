// A ring of STAGES shared-memory stages filled by TMA from a producer warp and read by the wgmma
// loop of two compute warpgroups (the Hopper GEMM and dZ kernels). Each stage holds an A tile
// and, at B_OFFSET, a B tile, STAGE_BYTES in all, and has a pair of mbarriers:
//   full[s]:  the producer's arrive.expect_tx of the stage's bytes; completes when they landed;
//   empty[s]: one arrival per compute warp once its products on the stage are done.
// Waits are parity waits: the j-th fill of a stage is its phase j.
//
// Why not the cp.async ring of the other loops (templates/common/slice_ring.cuh): there every
// thread copies and the block meets at a barrier every slice, so a stage is refilled only after
// both warpgroups passed the next barrier, two slices ahead of its use. Here a stage is refilled
// as soon as both warpgroups' products on it are done, three slices ahead, and the compute warps
// issue nothing but their wgmma and their waits.
//
// Shared memory: the stages from the 1024-byte aligned start, then the 2 x STAGES mbarriers.
#pragma once

#include "common/ptx_tma.cuh"
#include "common/wgmma_mainloop.cuh"

namespace shardjit {
namespace kernels {

// The stage and phase a side of the ring is at; both sides walk the same slices in order.
template <int STAGES>
struct TmaRingCursor {
  int stage = 0;
  unsigned int phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

template <int STAGES, unsigned int STAGE_BYTES, unsigned int B_OFFSET>
struct TmaRing {
  static constexpr unsigned int kStageBytes = STAGE_BYTES;
  static constexpr unsigned int kComputeWarps = 8;
  static constexpr unsigned int kComputeThreads = 32 * kComputeWarps;
  static constexpr int kBarrierBytes = 16 * STAGES;

  unsigned char* smem;
  unsigned int barriers;

  __device__ explicit TmaRing(unsigned char* base)
      : smem(base), barriers(smem_addr(base) + STAGES * STAGE_BYTES) {}

  // The producer is the warp after the compute warps.
  __device__ static bool is_producer(int warp) { return warp == static_cast<int>(kComputeWarps); }

  // Every thread of the block calls it once, before either side starts.
  __device__ void init(int tid) const {
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(full(s), 1);
        mbarrier_init(empty(s), kComputeWarps);
      }
      fence_mbarrier_init();
    }
    __syncthreads();
  }

  // Producer, one thread: waits until the cursor's stage is free, then lets `load(dst, bar)`
  // issue its copies into it (shared address dst, completing on mbarrier bar) for STAGE_BYTES.
  template <class Load>
  __device__ __forceinline__ void produce(const TmaRingCursor<STAGES>& at, Load&& load) const {
    mbarrier_wait_parity(empty(at.stage), at.phase ^ 1u);
    mbarrier_arrive_expect_tx(full(at.stage), STAGE_BYTES);
    load(smem_addr(smem) + static_cast<unsigned int>(at.stage) * STAGE_BYTES, full(at.stage));
  }

  // Compute warps: `count` slices of the ring into the wgmma loop, one slice's products left in
  // flight while the next is issued; each stage is released once its products are done. The
  // mainloop's accumulators are final after its finish().
  template <class T, class Mainloop>
  __device__ __forceinline__ void consume(Mainloop& mainloop, int count, int warp, int lane) const {
    static_assert(Mainloop::kSlicesInFlight == 1, "the ring releases a stage one slice after its products");
    TmaRingCursor<STAGES> at;
    int held = -1;  // the stage whose products may still run
    for (int i = 0; i < count; ++i) {
      mbarrier_wait_parity(full(at.stage), at.phase);
      const unsigned char* const stage = smem + at.stage * STAGE_BYTES;
      // Issues this slice's products and waits for the previous slice's: its stage is free.
      mainloop.compute(reinterpret_cast<const T*>(stage), reinterpret_cast<const T*>(stage + B_OFFSET), warp, lane,
                       [] {});
      if (held >= 0 && lane == 0) mbarrier_arrive(empty(held));
      held = at.stage;
      at.advance();
    }
  }

 private:
  __device__ unsigned int full(int s) const { return barriers + 8u * static_cast<unsigned int>(s); }
  __device__ unsigned int empty(int s) const { return barriers + 8u * static_cast<unsigned int>(STAGES + s); }
};

}  // namespace kernels
}  // namespace shardjit
