// Marks functions that both the host compiler and NVRTC compile, for headers shared by the
// runtime and the kernels (NVRTC rejects unannotated functions; g++ does not know the keywords).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SHARDJIT_HOST_DEVICE __host__ __device__
#else
#define SHARDJIT_HOST_DEVICE
#endif
