// The Hopper path's load pipeline for the logit kernels (forward, dZ): a ring of STAGES shared-
// memory stages, each an X tile [BM][BK] and a W tile [BN][BK] in 128-byte swizzled rows (what
// wgmma reads, templates/common/wgmma_mainloop.cuh), filled by TMA from a producer warp and
// drained by the compute warpgroups, with one mbarrier pair per stage:
//   full[s]:  the producer's arrive.expect_tx of the stage's bytes; completes when they landed.
//   empty[s]: one arrival per compute warpgroup of every block of the cluster; completes when
//             no block reads the stage any more.
// The cluster's kTmaClusterBlocks blocks are consecutive row tiles walking the same W tiles:
// each copies its own X tile and 1 / kTmaClusterBlocks of the W tile, multicast into the same
// stage of every block, so each W byte leaves L2 once per cluster instead of once per block.
// A stage is refilled only when every block released it, since the multicast writes all of them.
//
// Waits are parity waits: the k-th fill of a stage is its phase k. A block's last act is a
// cluster barrier, so that no block exits while a peer may still write into it or arrive on it.
#pragma once

#include "common/ptx_tma.cuh"
#include "common/tma_ring_layout.cuh"

namespace shardjit {
namespace kernels {

template <class T, int BM, int BN, int BK, int STAGES>
struct TmaRing {
  static_assert(BK * sizeof(T) == 128, "stages are rows of 128 bytes (the 128-byte swizzle)");
  static_assert(BN % kTmaClusterBlocks == 0 && BN / kTmaClusterBlocks <= 256 && BM <= 256,
                "each block's part of the W tile, and the X tile, are one TMA box (at most 256 rows)");
  static constexpr unsigned int kXBytes = BM * BK * sizeof(T);
  static constexpr unsigned int kWPartBytes = BN / kTmaClusterBlocks * BK * sizeof(T);
  static constexpr unsigned int kStageBytes = kXBytes + kTmaClusterBlocks * kWPartBytes;
  static constexpr unsigned int kComputeWarpgroups = 2;

  // ring: shared address of stage 0 (1024-byte aligned); barriers: 2 * STAGES mbarriers.
  __device__ TmaRing(unsigned int ring_address, unsigned int barrier_address)
      : ring(ring_address), barriers(barrier_address) {}

  // By one thread of each block, before the cluster barrier that publishes it.
  __device__ void init() const {
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), kComputeWarpgroups * kTmaClusterBlocks);
    }
    fence_mbarrier_init_cluster();
  }

  // Producer (one thread): the next slice into the next stage once every block released it. X
  // rows [x_row, x_row + BM) at columns [k0, k0 + BK); this block's part of W rows [w_row, w_row +
  // BN). Rows and columns past the tensors arrive as zeros.
  __device__ void produce(const TmaDescriptor* x_map, const TmaDescriptor* w_map, int k0, int x_row, int w_row,
                          unsigned int cta) {
    mbarrier_wait_parity(empty(stage), phase ^ 1u);
    mbarrier_arrive_expect_tx(full(stage), kStageBytes);
    const unsigned int dst = ring + static_cast<unsigned int>(stage) * kStageBytes;
    tma_load_2d(dst, x_map, k0, x_row, full(stage));
    const unsigned int w_dst = dst + kXBytes + cta * kWPartBytes;
    const int w_part_row = w_row + static_cast<int>(cta) * (BN / kTmaClusterBlocks);
    if constexpr (kTmaClusterBlocks == 1) {
      tma_load_2d(w_dst, w_map, k0, w_part_row, full(stage));
    } else {
      tma_load_2d_multicast(w_dst, w_map, k0, w_part_row, full(stage),
                            static_cast<unsigned short>((1u << kTmaClusterBlocks) - 1));
    }
    advance();
  }

  // Consumer: waits for the current stage's bytes; returns its index.
  __device__ int wait_full() {
    mbarrier_wait_parity(full(stage), phase);
    const int s = stage;
    advance();
    return s;
  }

  // Consumer: stage s is no longer read by this warpgroup (its wgmma have completed). One thread
  // of the warpgroup tells every block of the cluster.
  __device__ void release(int s, bool signals) const {
    if (!signals) return;
    for (unsigned int cta = 0; cta < kTmaClusterBlocks; ++cta) mbarrier_arrive_cluster(empty(s), cta);
  }

 private:
  __device__ unsigned int full(int s) const { return barriers + 8u * static_cast<unsigned int>(s); }
  __device__ unsigned int empty(int s) const { return barriers + 8u * static_cast<unsigned int>(STAGES + s); }
  __device__ void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }

  unsigned int ring;
  unsigned int barriers;
  int stage = 0;
  unsigned int phase = 0;
};

}  // namespace kernels
}  // namespace shardjit
