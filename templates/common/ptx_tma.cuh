// Wrappers over the sm_90 instructions of the Hopper path's load pipeline
// (templates/common/tma_ring.cuh): mbarriers, the tensor-memory-accelerator copy (TMA) with its
// cluster multicast form, and the cluster barrier. One instruction per function, named after it.
// Shared-memory operands are 32-bit shared-window addresses (smem_addr).
#pragma once

#include "common/ptx.cuh"
#include "common/tma_descriptor.cuh"

namespace shardjit {
namespace kernels {

__device__ __forceinline__ void mbarrier_init(unsigned int bar, unsigned int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes the mbarrier initializations visible to the other blocks of the cluster (their remote
// arrivals and multicast copies), together with the cluster barrier that follows.
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on the barrier and raises the bytes its current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Arrives on the barrier at the same shared-memory offset in block `cta` of the cluster (this
// block included), releasing this thread's earlier accesses at cluster scope.
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned int bar, unsigned int cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}

// Waits until the phase of the given parity has completed. A fresh barrier is in phase 0, so
// waiting on parity 1 returns at once (the phase "before" it counts as complete).
__device__ __forceinline__ void mbarrier_wait_parity(unsigned int bar, unsigned int parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// TMA: copies the box at (x, y) (elements; x the contiguous dimension) of the descriptor's tensor
// into shared memory at dst, zero-filling what lies outside the tensor, and completes its bytes
// on the barrier `bar` (same block).
__device__ __forceinline__ void tma_load_2d(unsigned int dst, const TmaDescriptor* map, int x, int y,
                                            unsigned int bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// As tma_load_2d, into the same shared-memory offset of every block of the cluster named in
// cta_mask, completing the bytes on the barrier at offset `bar` in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned int dst, const TmaDescriptor* map, int x, int y,
                                                      unsigned int bar, unsigned short cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "h"(cta_mask)
      : "memory");
}

__device__ __forceinline__ unsigned int cluster_cta_rank() {
  unsigned int rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// Every thread of every block of the cluster arrives, then waits for all the others (release /
// acquire at cluster scope). Executed by whole warps.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

}  // namespace kernels
}  // namespace shardjit
