#include "runtime/driver/cuda_driver.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

struct LoadResult {
  DriverApi api;
  bool ok = false;
  ErrorCode code = ErrorCode::kNoDevice;
  std::string error;
};

LoadResult load_driver() {
  LoadResult result;
  // The driver lives outside any toolkit; only the soname of the driver package is stable.
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    result.error = std::string("the CUDA driver (libcuda.so.1) could not be opened: ") +
                   (reason ? reason : "unknown reason") +
                   "; a GPU and the NVIDIA driver are needed for this operation";
    return result;
  }
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    result.code = ErrorCode::kDriverError;
    result.error = "libcuda.so.1 has no cuGetProcAddress_v2; a driver for CUDA 12 or newer is needed";
    return result;
  }
  DriverApi& api = result.api;
#define SHARDJIT_DRIVER_LOAD(name)                                                              \
  {                                                                                             \
    void* fn = nullptr;                                                                         \
    CUdriverProcAddressQueryResult status{};                                                    \
    CUresult rc = get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status);     \
    if (rc != CUDA_SUCCESS || fn == nullptr) {                                                  \
      result.code = ErrorCode::kDriverError;                                                    \
      result.error = std::string("the CUDA driver has no entry point " #name                    \
                                 " at version ") + std::to_string(CUDA_VERSION) +               \
                     "; the driver is older than the CUDA toolkit shardjit was built with";     \
      return result;                                                                            \
    }                                                                                           \
    api.name = reinterpret_cast<decltype(api.name)>(fn);                                        \
  }
  SHARDJIT_DRIVER_FUNCTIONS(SHARDJIT_DRIVER_LOAD)
#undef SHARDJIT_DRIVER_LOAD

  CUresult rc = api.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    api.cuGetErrorName(rc, &name);
    result.error = std::string("cuInit failed (") + (name ? name : "unknown") +
                   "): no usable GPU on this machine";
    return result;
  }
  api.cuDriverGetVersion(&api.driver_version);
  result.ok = true;
  return result;
}

const LoadResult& loaded() {
  // Process-wide by nature: there is one driver per process. Loaded once, never unloaded.
  static const LoadResult result = load_driver();
  return result;
}

}  // namespace

const DriverApi& driver() {
  const LoadResult& result = loaded();
  if (!result.ok) throw Error(result.code, result.error);
  return result.api;
}

bool driver_available() noexcept {
  try {
    return loaded().ok;
  } catch (...) {
    return false;
  }
}

void check_cu(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const DriverApi& api = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  api.cuGetErrorName(result, &name);
  api.cuGetErrorString(result, &text);
  throw Error(ErrorCode::kDriverError, std::string(call) + " failed: " + (name ? name : "?") +
                                           " (" + (text ? text : "no message") + ")");
}

}  // namespace shardjit
