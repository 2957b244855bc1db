// Any DLPack tensor (PyTorch, CuPy, JAX, NumPy) -> shardjit::MatrixView / VectorView. Every
// check names the argument and says what was expected: TypeError for a wrong dtype, ValueError
// for a wrong rank, layout or device, or a read-only output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/ndarray.h>

#include "shardjit/dtype.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit::python {

// An input: read-only arrays (JAX, NumPy with writeable=False) are accepted too.
using Tensor = nanobind::ndarray<nanobind::ro>;

// An output, taken as any array and refused by the views below when read-only: a writable
// nanobind::ndarray parameter would refuse it too, but as an overload mismatch that names
// neither the argument nor the reason. `writable` is what the producer says (DLPack's read-only
// flag, or the buffer protocol's readonly); one that cannot say (an unversioned DLPack capsule)
// counts as writable.
struct OutputTensor {
  Tensor tensor;
  bool writable = false;
};

// The shardjit dtype of a DLPack dtype; empty for one shardjit has no name for.
std::optional<DType> dtype_of(const Tensor& tensor);

// Where a tensor must live: the CUDA device (an ordinal of this process, as PyTorch numbers them)
// of the op that reads or writes it. A kernel handed another GPU's pointer would read across the
// link or fault; the views carry no device, so this is the one place that can tell.
// kAnyPlace skips the check (the cpu-tier tests' NumPy arrays).
constexpr int kAnyPlace = -1;

// `dtype` empty: any dtype shardjit knows. The OutputTensor overloads first refuse a read-only
// array (ValueError "<name>: expected a writable tensor, got a read-only one").
MatrixView matrix_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device);
MatrixView matrix_view(const OutputTensor& tensor, const char* name, std::optional<DType> dtype, int device);
VectorView vector_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device);
VectorView vector_view(const OutputTensor& tensor, const char* name, std::optional<DType> dtype, int device);

// An absent optional tensor (input or output) is the empty view (of `dtype`, fp32 if none).
template <typename AnyTensor>
VectorView vector_view(const std::optional<AnyTensor>& tensor, const char* name, std::optional<DType> dtype,
                       int device) {
  if (!tensor) return VectorView{nullptr, dtype.value_or(DType::kFP32), 0};
  return vector_view(*tensor, name, dtype, device);
}

// Views of tensors given by device address (torch's data_ptr()), for the torch layer: DLPack
// costs PyTorch about 3.5 us a tensor, an address nothing. The caller vouches for what a DLPack
// view would have checked: a contiguous tensor of `dtype` with these sizes on the op's device
// (shardjit.torch keys its ops by exactly those, and checks the devices). Address 0 is an absent
// tensor. The op still checks the sizes, alignment and overlaps.
inline MatrixView matrix_at(std::uintptr_t address, DType dtype, std::int64_t rows, std::int64_t cols) {
  return MatrixView{reinterpret_cast<void*>(address), dtype, rows, cols, cols};
}
inline VectorView vector_at(std::uintptr_t address, DType dtype, std::int64_t size) {
  return VectorView{reinterpret_cast<void*>(address), dtype, address == 0 ? 0 : size};
}

// A CUDA stream given in Python as an integer (a cudaStream_t; 0: the legacy default stream).
inline StreamHandle stream_arg(std::uintptr_t stream) { return reinterpret_cast<StreamHandle>(stream); }

// A dtype given by name in Python ("bf16", "float32", "torch.bfloat16", ...); ValueError naming
// `what` otherwise.
DType parse_dtype_arg(const char* what, const std::string& text);

// A dtype given as a name or a torch dtype (torch.bfloat16); TypeError naming `what` for any other
// object, ValueError for an unknown name.
DType dtype_arg(const char* what, nanobind::handle value);

}  // namespace shardjit::python

namespace nanobind::detail {

// Tries the array as writable first (one import for the usual, writable output), then as
// read-only. Signatures show it as the writable counterpart of the inputs' ndarray[writable=False].
// `Flags` is deduced: nanobind 2 passes it as uint8_t, nanobind 3 as uint32_t.
template <>
struct type_caster<shardjit::python::OutputTensor> {
  NB_TYPE_CASTER(shardjit::python::OutputTensor, const_name("ndarray[writable=True]"))

  template <typename Flags>
  bool from_python(handle src, Flags flags, cleanup_list* cleanup) noexcept {
    make_caster<ndarray<>> writable;
    if (writable.from_python(src, flags, cleanup)) {
      value = {shardjit::python::Tensor(writable.value), true};
      return true;
    }
    make_caster<shardjit::python::Tensor> read_only;
    if (!read_only.from_python(src, flags, cleanup)) return false;
    value = {read_only.value, false};
    return true;
  }
};

}  // namespace nanobind::detail
