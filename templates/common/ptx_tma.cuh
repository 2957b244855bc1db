// Wrappers over the sm_90 instructions of a TMA-fed ring (templates/gemm/gemm_tma.cuh): mbarriers
// and the tensor-memory-accelerator copy. One instruction per function, named after it.
// Shared-memory operands are 32-bit shared-window addresses (smem_addr).
#pragma once

#include "common/ptx.cuh"
#include "common/tma_descriptor.cuh"

namespace shardjit {
namespace kernels {

__device__ __forceinline__ void mbarrier_init(unsigned int bar, unsigned int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes this thread's mbarrier initializations visible to the async proxy (the TMA units that
// complete bytes on them); a block barrier then publishes them to the other threads.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on the barrier and raises the bytes its current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned int bar, unsigned int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// Arrives on the barrier (releasing this thread's earlier accesses at block scope).
__device__ __forceinline__ void mbarrier_arrive(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
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

// TMA: copies the box at (x, y) (elements; x the contiguous dimension) of the map's tensor into
// shared memory at dst, zero-filling what lies outside the tensor, and completes its bytes on
// the barrier `bar` of this block.
__device__ __forceinline__ void tma_load_2d(unsigned int dst, const TmaDescriptor* map, int x, int y,
                                            unsigned int bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

// tma_load_2d with an L2 cache policy for the lines it brings in (l2_policy, common/ptx.cuh).
__device__ __forceinline__ void tma_load_2d_hint(unsigned int dst, const TmaDescriptor* map, int x, int y,
                                                 unsigned int bar, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "l"(policy)
      : "memory");
}

// tma_load_2d into every block of the cluster named in `blocks` (a bit a block rank): the box
// lands at offset dst of each one's shared memory and completes its bytes on the barrier at offset
// bar of each.
__device__ __forceinline__ void tma_load_2d_multicast(unsigned int dst, const TmaDescriptor* map, int x, int y,
                                                      unsigned int bar, unsigned short blocks) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(bar), "h"(blocks)
      : "memory");
}

// This block's rank in its cluster (0 in a launch without clusters).
__device__ __forceinline__ unsigned int cluster_block_rank() {
  unsigned int rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

// The cluster-window address of shared-memory offset `addr` of block `rank` of this cluster.
__device__ __forceinline__ unsigned int mapa_shared(unsigned int addr, unsigned int rank) {
  unsigned int mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(addr), "r"(rank));
  return mapped;
}

// Arrives on an mbarrier of any block of the cluster (a mapa_shared address), with the default
// semantics (release at block scope): it says that this thread's reads of a stage are done, all a
// ring needs; `.release.cluster` arrivals measured slower (perf-notes, rejected GEMM row pairs).
__device__ __forceinline__ void mbarrier_arrive_cluster(unsigned int bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Every thread of every block of the cluster meets here.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// TMA: writes the box at (x, y) of the map's tensor from shared memory at src, leaving out what
// lies outside the tensor. Completes in this thread's bulk groups (bulk_commit_group,
// bulk_wait_group_read_all: common/ptx_bulk.cuh); the source must be fenced into the async proxy.
__device__ __forceinline__ void tma_store_2d(const TmaDescriptor* map, int x, int y, unsigned int src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(x),
               "r"(y), "r"(src)
               : "memory");
}

// Register reconfiguration (sm_90a): every thread of the warpgroup lowers, or raises, the
// registers it may use to REGS (a multiple of 8, 24 to 256); a raise waits until the block's
// other warpgroups have given up enough.
template <int REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

template <int REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

}  // namespace kernels
}  // namespace shardjit
