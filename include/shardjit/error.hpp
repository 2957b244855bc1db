// The one error type of shardjit. Every failure the library reports is a shardjit::Error with a
// code a program can branch on and a message that says what was wrong and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace shardjit {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // bad input from the caller (shapes, dtypes, options, files)
  kNotFound = 2,          // a kernel missing from the cache in cache-only mode, an unknown template
  kCompileFailed = 3,     // NVRTC rejected a specialized template
  kCacheError = 4,        // the cache folder is unsafe or unusable
  kDriverError = 5,       // the CUDA driver is missing or a driver call failed
  kNoDevice = 6,          // a GPU operation on a machine without a usable GPU
  kCommError = 7,         // NCCL or a peer failed, or a collective timed out
  kDeviceStatus = 8,      // the device reported bad data (e.g. target ids out of range)
  kInternal = 9,          // a bug in shardjit
};

// Stable lower-case name of a code ("invalid_argument", ...), used in messages and the C API.
const char* error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace shardjit
