// One GPU as the library uses it: its properties and its primary context (the context the CUDA
// runtime and the frameworks use, so our modules and the caller's streams live in the same one).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardjit {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::size_t smem_per_block_optin = 0;
  std::size_t total_memory = 0;
  std::int64_t l2_bytes = 0;
};

// The NVRTC target for a compute capability: "sm_90a" on Hopper (wgmma needs the a-variant),
// "sm_XY" elsewhere.
std::string arch_for_compute_capability(int major, int minor);

// Number of devices; 0 (never an error) when there is no driver.
int device_count() noexcept;

class DeviceContext {
 public:
  explicit DeviceContext(int ordinal);  // retains the primary context
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  std::string arch() const { return arch_for_compute_capability(info_.cc_major, info_.cc_minor); }
  CUcontext context() const { return context_; }
  CUdevice device() const { return device_; }

 private:
  DeviceInfo info_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

// Makes a context current for the lifetime of the scope, restoring the previous one after.
class ScopedContext {
 public:
  explicit ScopedContext(const DeviceContext& device);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
};

// Device memory owned by the library (workspaces, status words), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceContext& device, std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const { return reinterpret_cast<T*>(ptr_); }

 private:
  void release() noexcept;
  const DeviceContext* device_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace shardjit
