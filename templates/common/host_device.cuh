// Marks functions that both the host compiler and NVRTC compile, for headers shared by the
// runtime and the kernels (NVRTC rejects unannotated functions; g++ does not know the keywords),
// and the small helpers such headers share.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SHARDJIT_HOST_DEVICE __host__ __device__
// The same, always inlined into the kernels (a loop over segments around their main loops).
#define SHARDJIT_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define SHARDJIT_HOST_DEVICE
#define SHARDJIT_HOST_DEVICE_INLINE inline
#endif

namespace shardjit {
namespace kernels {

// The smaller of two ints, for the host and the kernels alike (NVRTC has no std::min).
SHARDJIT_HOST_DEVICE constexpr int min_int(int a, int b) { return a < b ? a : b; }

}  // namespace kernels
}  // namespace shardjit
