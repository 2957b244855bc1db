// Timing of GPU work with CUDA events: warm-up runs first, then the median of many timed runs.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace shardjit::bench {

inline void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

struct TimingOptions {
  int warmup = 5;
  int iterations = 20;
};

// Median milliseconds of `work` enqueued on `stream`.
double median_ms(const std::function<void()>& work, cudaStream_t stream, const TimingOptions& options);

// Median milliseconds per call of `work` replayed from a CUDA graph that holds `calls` of them
// (captured on `stream`, which must not be the legacy default stream): the GPU's time per call
// without the host's launch work in the loop, as a server that replays graphs sees it.
double graph_median_ms(const std::function<void()>& work, int calls, cudaStream_t stream, const TimingOptions& options);

// Bytes of device memory in use by this process's allocations beyond a baseline (cudaMemGetInfo).
std::size_t device_free_bytes();

}  // namespace shardjit::bench
