// Any DLPack tensor (PyTorch, CuPy, JAX, NumPy) -> shardjit::MatrixView / VectorView. Every
// check names the argument and says what was expected: TypeError for a wrong dtype, ValueError
// for a wrong rank, layout or device.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/ndarray.h>

#include "shardjit/dtype.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit::python {

// Read-only arrays (JAX) are accepted too; outputs are the caller's to pass writable.
using Tensor = nanobind::ndarray<nanobind::ro>;

// The shardjit dtype of a DLPack dtype; empty for one shardjit has no name for.
std::optional<DType> dtype_of(const Tensor& tensor);

// Where a tensor must live: the CUDA device (an ordinal of this process, as PyTorch numbers them)
// of the op that reads or writes it. A kernel handed another GPU's pointer would read across the
// link or fault; the views carry no device, so this is the one place that can tell.
// kAnyPlace skips the check (the cpu-tier tests' NumPy arrays).
constexpr int kAnyPlace = -1;

// `dtype` empty: any dtype shardjit knows.
MatrixView matrix_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device);
VectorView vector_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device);
// An absent optional tensor is the empty view (of `dtype`, fp32 if none).
VectorView vector_view(const std::optional<Tensor>& tensor, const char* name, std::optional<DType> dtype, int device);

// A CUDA stream given in Python as an integer (a cudaStream_t; 0: the legacy default stream).
inline StreamHandle stream_arg(std::uintptr_t stream) { return reinterpret_cast<StreamHandle>(stream); }

// A dtype given by name in Python ("bf16", "float32", ...); ValueError naming `what` otherwise.
DType parse_dtype_arg(const char* what, const std::string& text);

}  // namespace shardjit::python
