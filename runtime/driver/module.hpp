// A CUBIN loaded into a device's context, unloaded on destruction, and one kernel of it.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "runtime/driver/device.hpp"

namespace shardjit {

class LoadedModule {
 public:
  LoadedModule(const DeviceContext& device, const std::string& cubin);
  ~LoadedModule();
  LoadedModule(const LoadedModule&) = delete;
  LoadedModule& operator=(const LoadedModule&) = delete;

  CUfunction function(const std::string& lowered_name) const;
  const DeviceContext& device() const { return device_; }

 private:
  const DeviceContext& device_;
  CUmodule module_ = nullptr;
};

// A kernel ready to launch: keeps its module alive.
struct LoadedKernel {
  std::shared_ptr<const LoadedModule> module;
  CUfunction function = nullptr;
  std::string spec_text;
};

}  // namespace shardjit
