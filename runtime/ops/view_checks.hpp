// Checks of the tensor views handed to an op, each throwing Error(kInvalidArgument) that names
// the argument, what it was and what was expected. Shared by every op.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "shardjit/tensor.hpp"

namespace shardjit {

// A matrix of `dtype` with `rows` x `cols`, 16-byte aligned rows (the kernels load 16 bytes at a
// time). `rows` < 0 accepts any row count. Returns the row stride in elements.
std::int64_t check_matrix(const MatrixView& view, const char* name, DType dtype, std::int64_t rows,
                          std::int64_t cols);

// A vector of `dtype` with `size` elements; null data is accepted only when `optional`.
// Returns whether data is present.
bool check_vector(const VectorView& view, const char* name, DType dtype, std::int64_t size, bool optional);

// The bytes a view spans, [begin, end) (empty for null data or no elements), under its name.
struct ByteSpan {
  const char* name = "";
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
};
ByteSpan span_of(const char* name, const MatrixView& view);
ByteSpan span_of(const char* name, const VectorView& view);

// Error(kInvalidArgument) naming both when an output shares bytes with another output or with an
// input: the kernels read their inputs while they write, and write each output in their own
// order, so an overlap would give wrong results without an error. Call it after the views'
// own checks (it trusts their extents).
void check_no_overlap(std::initializer_list<ByteSpan> outputs, std::initializer_list<ByteSpan> inputs);

}  // namespace shardjit
