// Checks of the tensor views handed to an op, each throwing Error(kInvalidArgument) that names
// the argument, what it was and what was expected. Shared by every op.
#pragma once

#include <cstdint>
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

}  // namespace shardjit
