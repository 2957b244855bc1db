// A ring of STAGES shared-memory stages filled by TMA from a producer warp and read by the wgmma
// loop of two compute warpgroups (the Hopper GEMM and dZ kernels). Each stage holds an A tile
// and, at B_OFFSET, a B tile, STAGE_BYTES in all (or an epilogue's input, such as the GEMM's
// addend tile, taken with acquire and given back with release), and has a pair of mbarriers:
//   full[s]:  the producer's arrive.expect_tx of the stage's bytes; completes when they landed;
//   empty[s]: one arrival per compute warp once its products on the stage (or its reads of it)
//             are done.
// Waits are parity waits: the j-th fill of a stage is its phase j.
//
// Why not the cp.async ring of the other loops (templates/common/slice_ring.cuh): there every
// thread copies and the block meets at a barrier every slice, so a stage is refilled only after
// both warpgroups passed the next barrier, two slices ahead of its use. Here a stage is refilled
// as soon as both warpgroups' products on it are done, three slices ahead, and the compute warps
// issue nothing but their wgmma and their waits.
//
// Block: the two compute warpgroups, then a producer warpgroup of which one warp works
// (kTmaRingBlockThreads). Registers are allotted per multiprocessor quarter, a warp to a quarter in
// turn, so a block of 288 threads would leave each thread 168 registers, too few for the
// compute warps' epilogues. A block of 384 gets 384 x 168 = 64512 registers, which setmaxnreg
// redistributes: the producer warpgroup gives up all but kProducerRegisters and the compute
// warpgroups take kComputeRegisters. A raise waits until the block's pool has the registers, so
// 2 x 128 x kComputeRegisters + 128 x kProducerRegisters must not exceed the pool, or the
// compute warps wait forever.
//
// Shared memory: the stages from the 1024-byte aligned start, then the 2 x STAGES mbarriers.
//
// CLUSTERED rings (the GEMM's) may run in a cluster of blocks whose rings walk the same stages in
// the same order, each producer filling part of every block's stages (a multicast copy:
// templates/gemm/gemm_tma.cuh). A stage is then free only once every block's compute warps are
// done with it: each compute warp arrives on that stage's empty barrier in every block of the
// cluster, and every thread of the cluster meets before any exits (exit()), so that no block
// leaves while a peer may still copy into its shared memory or arrive on its barriers.
#pragma once

#include "common/ptx_tma.cuh"
#include "common/tma_ring_layout.cuh"
#include "common/wgmma_mainloop.cuh"

namespace shardjit {
namespace kernels {

// The stage and phase a side of the ring is at; both sides walk the same stages in order (K slices
// and any epilogue inputs between them).
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

template <int STAGES, unsigned int STAGE_BYTES, unsigned int B_OFFSET, bool CLUSTERED = false>
struct TmaRing {
  static constexpr unsigned int kComputeWarps = 8;
  static constexpr unsigned int kComputeThreads = 32 * kComputeWarps;
  static constexpr int kProducerRegisters = 56;
  static constexpr int kComputeRegisters = 224;
  // What each of the block's threads starts with: 65536 / 384, in steps of 8.
  static constexpr int kLaunchRegisters = 65536 / kTmaRingBlockThreads / 8 * 8;
  static_assert(2 * 128 * kComputeRegisters + 128 * kProducerRegisters <= kTmaRingBlockThreads * kLaunchRegisters,
                "the compute warps' raise fits the block's pool of registers");

  unsigned char* smem;
  unsigned int barriers;
  unsigned int cluster_blocks;  // blocks whose rings run in step: 1, or the cluster's (CLUSTERED)

  __device__ explicit TmaRing(unsigned char* base, unsigned int cluster = 1)
      : smem(base),
        barriers(smem_addr(base) + STAGES * STAGE_BYTES),
        cluster_blocks(CLUSTERED && cluster > 1 ? cluster : 1u) {}

  // The block's roles after init, in this shape (ptxas keeps the register split only where the
  // two sides' code never joins again; a clustered ring's exit() ends each side, `ring.exit();
  // return;`, before the returns below and at the compute side's end):
  //   if (Ring::in_producer_warpgroup(warp)) {
  //     Ring::enter_producer();
  //     if (!Ring::is_producer(warp)) return;
  //     ...; return;
  //   }
  //   Ring::enter_compute();
  __device__ static bool in_producer_warpgroup(int warp) { return warp >= static_cast<int>(kComputeWarps); }
  __device__ static bool is_producer(int warp) { return warp == static_cast<int>(kComputeWarps); }
  // The producer warpgroup gives its registers up to the compute warpgroups, which take them.
  __device__ static void enter_producer() { setmaxnreg_dec<kProducerRegisters>(); }
  __device__ static void enter_compute() { setmaxnreg_inc<kComputeRegisters>(); }

  // Every thread of the block calls it once, before either side starts.
  __device__ void init(int tid) const {
    if (tid == 0) {
      for (int s = 0; s < STAGES; ++s) {
        mbarrier_init(full(s), 1);
        mbarrier_init(empty(s), kComputeWarps * cluster_blocks);
      }
      fence_mbarrier_init();
    }
    // A cluster's barriers are all initialized before any peer's copy or arrival reaches them.
    if (clustered()) {
      cluster_sync();
    } else {
      __syncthreads();
    }
  }

  // Every thread of the block, last thing before it returns.
  __device__ void exit() const {
    if (clustered()) cluster_sync();
  }

  // Producer, one thread: waits until the cursor's stage is free, then lets `load(dst, bar)`
  // issue its copies into it (shared address dst, completing on mbarrier bar) for `bytes`
  // (at most STAGE_BYTES).
  template <class Load>
  __device__ __forceinline__ void produce(const TmaRingCursor<STAGES>& at, Load&& load,
                                          unsigned int bytes = STAGE_BYTES) const {
    mbarrier_wait_parity(empty(at.stage), at.phase ^ 1u);
    mbarrier_arrive_expect_tx(full(at.stage), bytes);
    load(smem_addr(smem) + static_cast<unsigned int>(at.stage) * STAGE_BYTES, full(at.stage));
  }

  // Compute warps: waits until the cursor's stage is filled and returns it. For a stage that holds
  // something other than a K slice (an epilogue's input), release gives it back once every
  // compute warp has read what it needs of it.
  __device__ __forceinline__ const unsigned char* acquire(const TmaRingCursor<STAGES>& at) const {
    mbarrier_wait_parity(full(at.stage), at.phase);
    return smem + at.stage * STAGE_BYTES;
  }
  __device__ __forceinline__ void release(const TmaRingCursor<STAGES>& at, int lane) const {
    __syncwarp();
    if (lane == 0) arrive_empty(at.stage);
  }

  // Compute warps: `count` slices of the ring, from the cursor on, into the wgmma loop, one
  // slice's products left in flight while the next is issued; each stage is released once its
  // products are done, the last one after the mainloop's finish(). The accumulators are final
  // on return.
  template <class T, class Mainloop>
  __device__ __forceinline__ void consume(Mainloop& mainloop, TmaRingCursor<STAGES>& at, int count, int warp,
                                          int lane) const {
    static_assert(Mainloop::kSlicesInFlight == 1, "the ring releases a stage one slice after its products");
    int held = -1;  // the stage whose products may still run
    // Not unrolled: a copy of the loop is 4 (or 8) wgmma over 128 or more accumulators with their fences, and the
    // compilers' copies (4 or more a call) made NVVM and ptxas take two to five times as long
    // while the tensor cores set the pace here, not the loop's integer work.
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      const unsigned char* const stage = acquire(at);
      // Issues this slice's products and waits for the previous slice's: its stage is free.
      mainloop.compute(reinterpret_cast<const T*>(stage), reinterpret_cast<const T*>(stage + B_OFFSET), warp, lane,
                       [] {});
      if (held >= 0 && lane == 0) arrive_empty(held);
      held = at.stage;
      at.advance();
    }
    mainloop.finish();
    if (held >= 0 && lane == 0) arrive_empty(held);
  }

  // Whether warp's warpgroup leaves out its products on a tile of which only the first `rows` rows
  // exist (rows past the operand's, which no epilogue stores), in a call of `row_tiles` row tiles:
  // where all its 64 rows lie past them and the call has one row tile. At a few rows the other
  // warpgroup then has the tensor cores alone, and the tile's products take half their time, which
  // a tile of a long K otherwise spends beside reading its B slices. After whole row tiles it
  // computes anyway: alone, its tile would end early and its block run ahead of the row tiles that
  // share its B slices, reading them from memory by itself where in step they share them in L2
  // (fwd+bwd at 300 rows 2.48-2.50 -> 2.55 ms; docs/perf-notes.md, "Rejected ideas").
  template <class Mainloop>
  __device__ static __forceinline__ bool warpgroup_passes(int warp, int rows, int row_tiles) {
    return row_tiles == 1 && !Mainloop::warpgroup_holds_rows(warp, rows);
  }

  // consume for a tile of `rows` rows in a call of `row_tiles` row tiles: a warpgroup that
  // warpgroup_passes issues no products and passes the slices on; its accumulators keep what they
  // held (zeros after clear()).
  template <class T, class Mainloop>
  __device__ __forceinline__ void consume_rows(Mainloop& mainloop, TmaRingCursor<STAGES>& at, int count, int rows,
                                               int row_tiles, int warp, int lane) const {
    if (warpgroup_passes<Mainloop>(warp, rows, row_tiles)) {
      pass(at, count, lane);
    } else {
      consume<T>(mainloop, at, count, warp, lane);
    }
  }

  // Compute warps with nothing to compute on `count` slices (a warpgroup whose rows all lie past
  // the call's): waits for each to fill and releases it at once, so that the ring turns as it
  // does for the warpgroup that computes. The wait keeps the arrivals in the stage's phase: an
  // arrival before the fill would count towards the fill before it.
  __device__ __forceinline__ void pass(TmaRingCursor<STAGES>& at, int count, int lane) const {
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      acquire(at);
      release(at, lane);
      at.advance();
    }
  }

 private:
  __device__ bool clustered() const { return CLUSTERED && cluster_blocks > 1; }

  // Compute warps, lane 0: the warp is done with stage s (in every block of a cluster).
  __device__ __forceinline__ void arrive_empty(int s) const {
    if (!clustered()) {
      mbarrier_arrive(empty(s));
      return;
    }
#pragma unroll 1
    for (unsigned int rank = 0; rank < cluster_blocks; ++rank) mbarrier_arrive_cluster(mapa_shared(empty(s), rank));
  }

  __device__ unsigned int full(int s) const { return barriers + 8u * static_cast<unsigned int>(s); }
  __device__ unsigned int empty(int s) const { return barriers + 8u * static_cast<unsigned int>(STAGES + s); }
};

}  // namespace kernels
}  // namespace shardjit
