#include "runtime/c_api_support.hpp"

namespace shardjit::c_api {

namespace {

struct LastError {
  std::string message;
  bool lost = false;  // the last call failed, but its message could not be copied
};

LastError& last_error() noexcept {
  thread_local LastError error;
  return error;
}

}  // namespace

const char* last_error_text() noexcept {
  const LastError& error = last_error();
  return error.lost ? "the call failed, and its message could not be kept (out of host memory)"
                    : error.message.c_str();
}

void clear_last_error() noexcept {
  last_error().message.clear();
  last_error().lost = false;
}

shardjit_status fail(shardjit_status status, const char* message) noexcept {
  LastError& error = last_error();
  try {
    error.message.assign(message);
    error.lost = false;
  } catch (...) {
    error.message.clear();
    error.lost = true;
  }
  return status;
}

shardjit::DType dtype_of(shardjit_dtype dtype) {
  if (dtype < SHARDJIT_BF16 || dtype > SHARDJIT_INT64) {
    throw shardjit::Error(shardjit::ErrorCode::kInvalidArgument,
                          "dtype " + std::to_string(static_cast<int>(dtype)) + " is not a shardjit_dtype");
  }
  return static_cast<shardjit::DType>(dtype);
}

shardjit::MatrixView matrix_of(const shardjit_matrix& m) {
  return {m.data, dtype_of(m.dtype), m.rows, m.cols, m.row_stride};
}

shardjit::MatrixView optional_matrix_of(const shardjit_matrix& m) {
  return {m.data, m.data ? dtype_of(m.dtype) : shardjit::MatrixView{}.dtype, m.rows, m.cols, m.row_stride};
}

shardjit::VectorView vector_of(const shardjit_vector& v) {
  return {v.data, v.data ? dtype_of(v.dtype) : shardjit::DType::kFP32, v.size};
}

}  // namespace shardjit::c_api
