#include "shardjit/error.hpp"

namespace shardjit {

const char* error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCompileFailed: return "compile_failed";
    case ErrorCode::kCacheError: return "cache_error";
    case ErrorCode::kDriverError: return "driver_error";
    case ErrorCode::kNoDevice: return "no_device";
    case ErrorCode::kCommError: return "comm_error";
    case ErrorCode::kDeviceStatus: return "device_status";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

}  // namespace shardjit
