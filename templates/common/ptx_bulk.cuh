// Wrappers over the sm_90 instructions that move a finished tile out through shared memory:
// stmatrix (accumulator fragments to shared memory) and the bulk copy from shared to global
// memory, with its group commit and wait. One instruction per function, named after it. Only
// kernels compiled for sm_90a instantiate them.
#pragma once

namespace shardjit {
namespace kernels {

// The inverse of ldmatrix_x4 (templates/common/ptx.cuh): four 8x8 b16 matrices, register i of
// lane l holding row l / 4, columns 2 * (l % 4) and 2 * (l % 4) + 1 of matrix i (the mma and
// wgmma fragment order); lane l supplies the address of row (l % 8) of matrix (l / 8).
__device__ __forceinline__ void stmatrix_x4(unsigned int addr, unsigned int r0, unsigned int r1, unsigned int r2,
                                            unsigned int r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from shared to global memory
// through the async proxy: the shared-memory writes it reads must be made visible to that proxy
// first (fence_proxy_async_shared, templates/common/ptx_wgmma.cuh). Tracked per thread in bulk
// groups.
__device__ __forceinline__ void bulk_copy_shared_to_global(void* dst, unsigned int src, unsigned int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

// Waits until this thread's committed bulk copies have read their shared-memory sources, so that
// the memory may be written again or the block may exit. Their global writes complete on their
// own; they are visible to the kernels launched after this one.
__device__ __forceinline__ void bulk_wait_group_read_all() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}

}  // namespace kernels
}  // namespace shardjit
