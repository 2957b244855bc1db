#include "support/device_array.hpp"

#include "runtime/driver/cuda_driver.hpp"

namespace shardjit::testing {

bool gpu_available() { return device_count() > 0; }

std::string no_gpu_reason() {
  return driver_available() ? "the CUDA driver reports no GPU" : "no CUDA driver or GPU on this machine";
}

const DeviceContext& test_device() {
  static DeviceContext device(0);
  return device;
}

DeviceArray::DeviceArray(std::size_t bytes) : DeviceArray(bytes, test_device()) {}

DeviceArray::DeviceArray(std::size_t bytes, const DeviceContext& device)
    : device_(&device), buffer_(device, bytes == 0 ? 16 : bytes) {}

void DeviceArray::upload(const void* data, std::size_t bytes) {
  if (bytes == 0) return;
  ScopedContext scope(*device_);
  SHARDJIT_CU(cuMemcpyHtoDAsync(buffer_.ptr(), data, bytes, nullptr));
  SHARDJIT_CU(cuStreamSynchronize(nullptr));
}

void DeviceArray::download(void* data, std::size_t bytes) const {
  if (bytes == 0) return;
  ScopedContext scope(*device_);
  SHARDJIT_CU(cuMemcpyDtoHAsync(data, buffer_.ptr(), bytes, nullptr));
  SHARDJIT_CU(cuStreamSynchronize(nullptr));
}

void DeviceArray::fill_bytes(std::uint8_t value) {
  ScopedContext scope(*device_);
  SHARDJIT_CU(cuMemsetD8Async(buffer_.ptr(), value, buffer_.bytes(), nullptr));
  SHARDJIT_CU(cuStreamSynchronize(nullptr));
}

}  // namespace shardjit::testing
