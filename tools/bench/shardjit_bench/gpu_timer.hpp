// Timing of GPU work with CUDA events: warm-up runs first, then the median of many timed runs.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardjit::bench {

inline void check_cuda(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(rc));
}

struct TimingOptions {
  int warmup = 5;
  int iterations = 20;
  double energy_seconds = 0;  // > 0: also the board's energy per call, over about this long (NVML)
  bool sequential = false;    // linear-logp: the op's calls, then the baseline's (not interleaved)
};

// Median milliseconds of `work` enqueued on `stream`.
double median_ms(const std::function<void()>& work, cudaStream_t stream, const TimingOptions& options);

// The median milliseconds of each of `works`, timed in interleaved rounds (one call of each a
// round, after `warmup` untimed rounds), so that the GPU's clocks and temperature, which drift
// over seconds at the power cap, weigh on each work alike: how an op is timed against its
// baseline.
std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& works, cudaStream_t stream,
                                          const TimingOptions& options);

// Median milliseconds per call of `work` replayed from a CUDA graph that holds `calls` of them
// (captured on `stream`, which must not be the legacy default stream): the GPU's time per call
// without the host's launch work in the loop, as a server that replays graphs sees it.
double graph_median_ms(const std::function<void()>& work, int calls, cudaStream_t stream, const TimingOptions& options);

// `calls` of `work` enqueued back to back with no event between them (as nccl-tests time),
// repeated: the median of the GPU's time per call between the burst's two events, and of the
// host's time per call to enqueue them. When the host's time is the larger, back-to-back calls
// are bound by the launches, not by the GPU.
struct BurstTiming {
  double gpu_ms_per_call = 0;
  double host_ms_per_call = 0;
};
BurstTiming burst_median(const std::function<void()>& work, int calls, cudaStream_t stream,
                         const TimingOptions& options);

// Bytes of device memory in use by this process's allocations beyond a baseline (cudaMemGetInfo).
std::size_t device_free_bytes();

}  // namespace shardjit::bench
