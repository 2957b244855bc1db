// Non-owning views of device memory handed to ops. shardjit never allocates or frees what a
// view points to; the caller keeps it alive until the work on the stream has finished.
#pragma once

#include <cstdint>

#include "shardjit/dtype.hpp"

namespace shardjit {

// A matrix [rows, cols] whose rows start row_stride elements apart (row_stride >= cols).
struct MatrixView {
  void* data = nullptr;
  DType dtype = DType::kBF16;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;  // in elements; 0 means packed (= cols)
};

// A contiguous vector [size].
struct VectorView {
  void* data = nullptr;
  DType dtype = DType::kFP32;
  std::int64_t size = 0;
};

// The caller's CUDA stream (a CUstream / cudaStream_t); null is the legacy default stream.
using StreamHandle = void*;

}  // namespace shardjit
