#include "device_data.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "gpu_timer.hpp"

namespace shardjit::bench {

void* random_device(std::size_t count, DType dtype, float scale, std::uint64_t seed) {
  const std::size_t size = dtype_size(dtype);
  std::vector<std::uint8_t> host(count * size);
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      std::uint64_t state = seed * 0x9e3779b97f4a7c15ull + w + 1;
      for (std::size_t i = w; i < count; i += workers) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17;
        float v = (static_cast<float>(state >> 40) / 16777216.0f * 2.0f - 1.0f) * scale;
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        if (dtype == DType::kFP32) {
          std::memcpy(&host[i * 4], &v, 4);
        } else if (dtype == DType::kBF16) {
          auto b = static_cast<std::uint16_t>(bits >> 16);
          std::memcpy(&host[i * 2], &b, 2);
        } else {
          auto h = static_cast<_Float16>(v);
          std::memcpy(&host[i * 2], &h, 2);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  void* device = nullptr;
  check_cuda(cudaMalloc(&device, host.size()), "cudaMalloc");
  check_cuda(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

RotatingInputs::RotatingInputs(const std::vector<InputSpec>& specs, DType dtype) {
  std::size_t set_bytes = 0;
  for (const InputSpec& spec : specs) set_bytes += spec.count * dtype_size(dtype);
  const std::size_t sets = std::clamp<std::size_t>((std::size_t{160} << 20) / std::max<std::size_t>(set_bytes, 1) + 1, 1, 8);
  for (std::size_t i = 0; i < sets; ++i) {
    std::vector<void*>& set = sets_.emplace_back();
    for (const InputSpec& spec : specs) set.push_back(random_device(spec.count, dtype, spec.scale, spec.seed + 1000 * i));
  }
}

RotatingInputs::~RotatingInputs() {
  for (const auto& set : sets_) {
    for (void* p : set) cudaFree(p);
  }
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace shardjit::bench
