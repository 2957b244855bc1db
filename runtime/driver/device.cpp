#include "runtime/driver/device.hpp"

#include <utility>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

std::string arch_for_compute_capability(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major == 9 && minor == 0) arch += "a";
  return arch;
}

int device_count() noexcept {
  if (!driver_available()) return 0;
  int count = 0;
  if (driver().cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

DeviceContext::DeviceContext(int ordinal) {
  const DriverApi& api = driver();
  int count = 0;
  SHARDJIT_CU(cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    throw Error(ErrorCode::kInvalidArgument, "device " + std::to_string(ordinal) +
                                                 " does not exist; this machine has " +
                                                 std::to_string(count) + " GPU(s)");
  }
  SHARDJIT_CU(cuDeviceGet(&device_, ordinal));
  char name[256] = {};
  SHARDJIT_CU(cuDeviceGetName(name, sizeof(name), device_));
  auto attribute = [&](CUdevice_attribute which) {
    int value = 0;
    check_cu(api.cuDeviceGetAttribute(&value, which, device_), "cuDeviceGetAttribute");
    return value;
  };
  info_.ordinal = ordinal;
  info_.name = name;
  info_.cc_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info_.cc_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info_.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info_.smem_per_block_optin =
      static_cast<std::size_t>(attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  info_.l2_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  SHARDJIT_CU(cuDeviceTotalMem(&info_.total_memory, device_));
  SHARDJIT_CU(cuDevicePrimaryCtxRetain(&context_, device_));
}

DeviceContext::~DeviceContext() {
  if (context_ != nullptr) driver().cuDevicePrimaryCtxRelease(device_);
}

ScopedContext::ScopedContext(const DeviceContext& device) {
  SHARDJIT_CU(cuCtxPushCurrent(device.context()));
}

ScopedContext::~ScopedContext() {
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);
}

DeviceBuffer::DeviceBuffer(const DeviceContext& device, std::size_t bytes)
    : device_(&device), bytes_(bytes) {
  if (bytes == 0) return;
  ScopedContext scope(device);
  SHARDJIT_CU(cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_), ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (ptr_ == 0) return;
  try {
    ScopedContext scope(*device_);
    driver().cuMemFree(ptr_);
  } catch (const std::exception& e) {
    log().warn("freeing a device buffer failed: {}", e.what());
  }
  ptr_ = 0;
}

}  // namespace shardjit
