// PTX wrappers for the memory-model instructions the cross-GPU kernels use: flags published with
// release stores and read with acquire loads at system scope (so a peer that sees a flag also
// sees the data written before it), vector loads and stores of raw bytes, named barriers, the
// global nanosecond timer that bounds every wait, and the grid dependency controls of an early
// start. One instruction per function.
#pragma once

namespace shardjit {
namespace kernels {

struct Bytes16 {
  unsigned int w[4];
};
struct Bytes8 {
  unsigned int w[2];
};
struct Bytes4 {
  unsigned int w[1];
};

__device__ __forceinline__ void st_release_sys_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long ld_acquire_sys_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Single-copy atomic 8-byte accesses at system scope, without ordering: a word and the flag in
// its other half arrive together or not at all (the low-latency protocol relies on it).
__device__ __forceinline__ void st_relaxed_sys_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;\n" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ unsigned long long ld_relaxed_sys_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];\n" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// 16 bytes a lane, always performed, at system scope and without ordering: the line protocol's
// 128-byte lines are stored and polled by 8 lanes of a warp in one instruction each.
__device__ __forceinline__ Bytes16 ld_volatile_v4_u32(const void* p) {
  Bytes16 r;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
               : "l"(p)
               : "memory");
  return r;
}

__device__ __forceinline__ void st_volatile_v4_u32(void* p, const Bytes16& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3])
               : "memory");
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Programmatic dependent launch (sm_90 and later; no-ops before, and in a kernel launched
// without LaunchShape::early_start). griddep_wait blocks until the stream's previous kernel has
// finished and its memory is visible: a kernel that may start early calls it before touching
// anything that kernel writes or reads. griddep_launch_dependents lets the stream's next kernel
// be launched (its blocks then wait in their own griddep_wait).
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// A release and acquire fence at GPU scope: orders this thread's (and, after a block barrier, the
// block's) memory accesses before it against those after it, for every thread of the GPU. Far
// cheaper than __threadfence (fence.sc), which every thread of a block would otherwise run.
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;\n" ::: "memory"); }

// Synchronizes the `threads` threads (a multiple of 32) of the block that use barrier `id`
// (1..15; 0 is __syncthreads'), so that two groups of warps can wait for their own members.
__device__ __forceinline__ void bar_sync(unsigned int id, unsigned int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// bar_sync that also ANDs `pred` over the participating threads and returns the result to all.
__device__ __forceinline__ bool bar_red_and(unsigned int id, unsigned int threads, bool pred) {
  unsigned int all;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.and.pred q, %2, %3, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(all)
      : "r"(static_cast<unsigned int>(pred)), "r"(id), "r"(threads)
      : "memory");
  return all != 0;
}

__device__ __forceinline__ Bytes16 ld_global_v4_u32(const void* p) {
  Bytes16 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3])
               : "l"(p)
               : "memory");
  return r;
}

__device__ __forceinline__ Bytes8 ld_global_v2_u32(const void* p) {
  Bytes8 r;
  asm volatile("ld.global.v2.u32 {%0, %1}, [%2];\n" : "=r"(r.w[0]), "=r"(r.w[1]) : "l"(p) : "memory");
  return r;
}

__device__ __forceinline__ Bytes4 ld_global_u32(const void* p) {
  Bytes4 r;
  asm volatile("ld.global.u32 %0, [%1];\n" : "=r"(r.w[0]) : "l"(p) : "memory");
  return r;
}

__device__ __forceinline__ void st_global_v4_u32(void* p, const Bytes16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]),
               "r"(v.w[3])
               : "memory");
}

__device__ __forceinline__ void st_global_v2_u32(void* p, const Bytes8& v) {
  asm volatile("st.global.v2.u32 [%0], {%1, %2};\n" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]) : "memory");
}

__device__ __forceinline__ void st_global_u32(void* p, const Bytes4& v) {
  asm volatile("st.global.u32 [%0], %1;\n" ::"l"(p), "r"(v.w[0]) : "memory");
}

// A store or a shared-memory max only where `pred` holds, as one predicated instruction: a branch
// around each of many small stores costs more than the stores (fwd_column_keep.cuh).
__device__ __forceinline__ void st_global_u32_if(bool pred, void* p, unsigned int v) {
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p st.global.u32 [%0], %1;\n}\n" ::"l"(p), "r"(v),
      "r"(static_cast<int>(pred))
      : "memory");
}
__device__ __forceinline__ void red_shared_max_s32_if(bool pred, int* p, int v) {
  const unsigned int address = static_cast<unsigned int>(__cvta_generic_to_shared(p));
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %2, 0;\n @p red.shared.max.s32 [%0], %1;\n}\n" ::"r"(address), "r"(v),
      "r"(static_cast<int>(pred))
      : "memory");
}

}  // namespace kernels
}  // namespace shardjit
