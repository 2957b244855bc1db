#include "runtime/c_api_support.hpp"

namespace shardjit::c_api {

std::string& last_error() {
  thread_local std::string message;
  return message;
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
