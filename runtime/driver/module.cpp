#include "runtime/driver/module.hpp"

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

LoadedModule::LoadedModule(const DeviceContext& device, const std::string& cubin) : device_(device) {
  ScopedContext scope(device);
  SHARDJIT_CU(cuModuleLoadData(&module_, cubin.data()));
}

LoadedModule::~LoadedModule() {
  if (module_ == nullptr) return;
  try {
    ScopedContext scope(device_);
    driver().cuModuleUnload(module_);
  } catch (const std::exception& e) {
    log().warn("unloading a module failed: {}", e.what());
  }
}

CUfunction LoadedModule::function(const std::string& lowered_name) const {
  CUfunction function = nullptr;
  CUresult rc = driver().cuModuleGetFunction(&function, module_, lowered_name.c_str());
  if (rc != CUDA_SUCCESS) {
    check_cu(rc, ("cuModuleGetFunction(" + lowered_name + ")").c_str());
  }
  return function;
}

}  // namespace shardjit
