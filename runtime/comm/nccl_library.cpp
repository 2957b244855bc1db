#include "runtime/comm/nccl_library.hpp"

#include <dlfcn.h>

#include "shardjit/error.hpp"

namespace shardjit {

std::string nccl_version_text(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

NcclLoad load_nccl(const char* library) {
  NcclLoad result;
  const std::string needed = std::string("; tensor-parallel ops need NCCL ") + nccl_version_text(kMinNcclVersion) +
                             " or newer as " + kNcclLibrary +
                             " on the loader's path (install libnccl2, or add its folder to LD_LIBRARY_PATH)";
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    result.error = std::string("NCCL could not be opened (") + (reason ? reason : library) + ")" + needed;
    return result;
  }
  NcclApi& api = result.api;
#define SHARDJIT_NCCL_LOAD(name)                                                                 \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(handle, #name));                         \
  if (api.name == nullptr) {                                                                     \
    result.error = std::string(library) + " has no entry point " #name + needed;                 \
    dlclose(handle);                                                                             \
    return result;                                                                               \
  }
  SHARDJIT_NCCL_FUNCTIONS(SHARDJIT_NCCL_LOAD)
#undef SHARDJIT_NCCL_LOAD
  if (api.ncclGetVersion(&api.version) != ncclSuccess || api.version < kMinNcclVersion) {
    result.error = std::string(library) + " is NCCL " + nccl_version_text(api.version) + needed;
    dlclose(handle);
    return result;
  }
  // Kept open for the life of the process, as the driver is.
  result.ok = true;
  return result;
}

namespace {

const NcclLoad& loaded() {
  // Process-wide by nature: one NCCL per process. Loaded on first use, never unloaded.
  static const NcclLoad result = load_nccl(kNcclLibrary);
  return result;
}

}  // namespace

const NcclApi& nccl() {
  const NcclLoad& result = loaded();
  if (!result.ok) throw Error(ErrorCode::kCommError, result.error);
  return result.api;
}

bool nccl_available() noexcept {
  try {
    return loaded().ok;
  } catch (...) {
    return false;
  }
}

void check_nccl(const NcclApi& api, ncclResult_t result, const char* call, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string message = std::string(call) + " failed: " + api.ncclGetErrorString(result);
  const char* last = comm != nullptr ? api.ncclGetLastError(comm) : api.ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') message += std::string(" (") + last + ")";
  throw Error(ErrorCode::kCommError, message);
}

ncclDataType_t nccl_type_of(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kFP16: return ncclFloat16;
    case DType::kFP32: return ncclFloat32;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
  }
  throw Error(ErrorCode::kInternal, "no NCCL type for dtype " + std::to_string(static_cast<int>(dtype)));
}

std::size_t nccl_type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: break;
  }
  throw Error(ErrorCode::kInternal, "no element size for NCCL type " + std::to_string(static_cast<int>(type)));
}

}  // namespace shardjit
