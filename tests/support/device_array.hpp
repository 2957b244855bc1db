// Device memory for GPU tests, through the library's own driver layer (device 0's primary
// context), so the tests need no CUDA runtime. `gpu_available()` says whether the GPU tier can
// run here; tests call GTEST_SKIP with `no_gpu_reason()` otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "runtime/driver/device.hpp"

namespace shardjit::testing {

bool gpu_available();
std::string no_gpu_reason();

// The test process's context on device 0 (created once).
const DeviceContext& test_device();

class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes);
  // On another device than the test device (a rank's GPU in the multi-GPU tests).
  DeviceArray(std::size_t bytes, const DeviceContext& device);
  template <class T>
  static DeviceArray from(const std::vector<T>& values) {
    return from(values, test_device());
  }
  template <class T>
  static DeviceArray from(const std::vector<T>& values, const DeviceContext& device) {
    DeviceArray array(values.size() * sizeof(T), device);
    array.upload(values.data(), values.size() * sizeof(T));
    return array;
  }

  void upload(const void* data, std::size_t bytes);
  void download(void* data, std::size_t bytes) const;
  void fill_bytes(std::uint8_t value);  // e.g. 0xff poisons floats with NaN
  template <class T>
  std::vector<T> to_vector(std::size_t count) const {
    std::vector<T> out(count);
    download(out.data(), count * sizeof(T));
    return out;
  }
  void* data() const { return reinterpret_cast<void*>(buffer_.ptr()); }
  std::size_t bytes() const { return buffer_.bytes(); }

 private:
  const DeviceContext* device_;
  DeviceBuffer buffer_;
};

}  // namespace shardjit::testing
