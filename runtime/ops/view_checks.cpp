#include "runtime/ops/view_checks.hpp"

#include <iterator>

#include "shardjit/error.hpp"

namespace shardjit {
namespace {

[[noreturn]] void bad(const char* name, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, std::string(name) + ": " + what);
}

}  // namespace

std::int64_t check_matrix(const MatrixView& view, const char* name, DType dtype, std::int64_t rows,
                          std::int64_t cols) {
  if (view.dtype != dtype) {
    bad(name, std::string("dtype is ") + dtype_name(view.dtype) + "; expected " + dtype_name(dtype));
  }
  if (rows >= 0 && view.rows != rows) {
    bad(name, "has " + std::to_string(view.rows) + " rows; expected " + std::to_string(rows));
  }
  if (view.rows < 0) bad(name, "has " + std::to_string(view.rows) + " rows; expected >= 0");
  if (view.cols != cols) {
    bad(name, "has " + std::to_string(view.cols) + " columns; expected " + std::to_string(cols));
  }
  const std::int64_t stride = view.row_stride == 0 ? view.cols : view.row_stride;
  if (stride < view.cols) {
    bad(name, "row_stride " + std::to_string(stride) + " is smaller than its " + std::to_string(view.cols) +
                  " columns");
  }
  if (view.rows == 0) return stride;
  if (view.data == nullptr) bad(name, "data is null");
  const auto address = reinterpret_cast<std::uintptr_t>(view.data);
  if (address % 16 != 0) bad(name, "data is not 16-byte aligned; the kernels load 16 bytes at a time");
  if ((stride * static_cast<std::int64_t>(dtype_size(dtype))) % 16 != 0) {
    bad(name, "row_stride " + std::to_string(stride) + " x " + std::to_string(dtype_size(dtype)) +
                  " bytes is not a multiple of 16 bytes");
  }
  return stride;
}

bool check_vector(const VectorView& view, const char* name, DType dtype, std::int64_t size, bool optional) {
  if (view.data == nullptr) {
    if (optional || size == 0) return false;
    bad(name, "data is null");
  }
  if (view.dtype != dtype) {
    bad(name, std::string("dtype is ") + dtype_name(view.dtype) + "; expected " + dtype_name(dtype));
  }
  if (view.size != size) {
    bad(name, "has " + std::to_string(view.size) + " elements; expected " + std::to_string(size));
  }
  if (reinterpret_cast<std::uintptr_t>(view.data) % dtype_size(dtype) != 0) {
    bad(name, "data is not aligned to its element size");
  }
  return true;
}

ByteSpan span_of(const char* name, const MatrixView& view) {
  ByteSpan span{name};
  if (view.data == nullptr || view.rows <= 0 || view.cols <= 0) return span;
  const std::int64_t stride = view.row_stride == 0 ? view.cols : view.row_stride;
  span.begin = reinterpret_cast<std::uintptr_t>(view.data);
  span.end = span.begin + static_cast<std::uintptr_t>(((view.rows - 1) * stride + view.cols) *
                                                      static_cast<std::int64_t>(dtype_size(view.dtype)));
  return span;
}

ByteSpan span_of(const char* name, const VectorView& view) {
  ByteSpan span{name};
  if (view.data == nullptr || view.size <= 0) return span;
  span.begin = reinterpret_cast<std::uintptr_t>(view.data);
  span.end = span.begin + static_cast<std::uintptr_t>(view.size * static_cast<std::int64_t>(dtype_size(view.dtype)));
  return span;
}

void check_no_overlap(std::initializer_list<ByteSpan> outputs, std::initializer_list<ByteSpan> inputs) {
  auto overlap = [](const ByteSpan& a, const ByteSpan& b) {
    return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
  };
  for (auto out = outputs.begin(); out != outputs.end(); ++out) {
    for (auto other = std::next(out); other != outputs.end(); ++other) {
      if (overlap(*out, *other)) {
        bad(out->name, std::string("shares memory with the output ") + other->name + "; expected separate buffers");
      }
    }
    for (const ByteSpan& in : inputs) {
      if (overlap(*out, in)) {
        bad(out->name, std::string("shares memory with the input ") + in.name +
                           "; expected an output that no input of the call overlaps");
      }
    }
  }
}

}  // namespace shardjit
