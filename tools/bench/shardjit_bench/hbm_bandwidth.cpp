#include "hbm_bandwidth.hpp"

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "device_data.hpp"
#include "gpu_timer.hpp"

namespace shardjit::bench {

double measured_hbm_gbps(double bytes) {
  const std::size_t count = static_cast<std::size_t>(bytes) / 4;
  // Random bits, as the sweep's inputs: constant bytes draw less power and may run faster.
  const std::unique_ptr<void, cudaError_t (*)(void*)> src(random_device(count, DType::kFP32, 1.0f, 7), &cudaFree);
  void* raw_dst = nullptr;
  check_cuda(cudaMalloc(&raw_dst, count * 4), "cudaMalloc (bandwidth copy)");
  const std::unique_ptr<void, cudaError_t (*)(void*)> dst(raw_dst, &cudaFree);
  cudaStream_t raw_stream = nullptr;
  check_cuda(cudaStreamCreate(&raw_stream), "cudaStreamCreate");
  const std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> stream(raw_stream, &cudaStreamDestroy);
  const double ms = median_ms(
      [&] { check_cuda(cudaMemcpyAsync(dst.get(), src.get(), count * 4, cudaMemcpyDeviceToDevice, raw_stream), "copy"); },
      raw_stream, TimingOptions{.warmup = 3, .iterations = 20});
  return 2.0 * static_cast<double>(count * 4) / (ms * 1e6);
}

}  // namespace shardjit::bench
