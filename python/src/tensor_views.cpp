#include "tensor_views.hpp"

#include <cstdint>
#include <string>
#include <string_view>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bindings.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

std::string describe_dtype(const Tensor& tensor) {
  if (auto dtype = dtype_of(tensor)) return dtype_name(*dtype);
  const nb::dlpack::dtype raw = tensor.dtype();
  return "an unsupported dtype (DLPack code " + std::to_string(raw.code) + ", " + std::to_string(raw.bits) +
         " bits)";
}

std::string describe_place(const Tensor& tensor) {
  if (tensor.device_type() == nb::device::cuda::value) return "CUDA device " + std::to_string(tensor.device_id());
  if (tensor.device_type() == nb::device::cpu::value) return "the CPU";
  return "DLPack device type " + std::to_string(tensor.device_type());
}

void check_common(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device, std::size_t ndim) {
  const std::optional<DType> actual = dtype_of(tensor);
  if (!actual || (dtype && *actual != *dtype)) {
    throw nb::type_error((std::string(name) + ": expected dtype " + (dtype ? dtype_name(*dtype) : "bf16, fp16, fp32, int32 or int64") +
                          ", got " + describe_dtype(tensor)).c_str());
  }
  if (tensor.ndim() != ndim) {
    throw nb::value_error((std::string(name) + ": expected a " + std::to_string(ndim) + "-d tensor, got " +
                           std::to_string(tensor.ndim()) + "-d").c_str());
  }
  if (device != kAnyPlace && (tensor.device_type() != nb::device::cuda::value ||
                              tensor.device_id() != static_cast<std::int32_t>(device))) {
    throw nb::value_error((std::string(name) + ": expected a tensor on CUDA device " + std::to_string(device) +
                           " (the op's), got one on " + describe_place(tensor)).c_str());
  }
}

// The one check of every output, made before the others: whatever else is wrong with a read-only
// array, writing it would be the worse mistake (its producer promised the memory would not change:
// NumPy's writeable=False guards data the caller must not change, a JAX array is immutable).
const Tensor& writable_tensor(const OutputTensor& tensor, const char* name) {
  if (!tensor.writable) {
    throw nb::value_error((std::string(name) + ": expected a writable tensor, got a read-only one").c_str());
  }
  return tensor.tensor;
}

// What _describe_tensor and _describe_output return: the view `tensor` converts to.
template <typename AnyTensor>
nb::dict describe(const AnyTensor& tensor, const std::string& name, const std::optional<std::string>& dtype,
                  std::size_t ndim, std::optional<int> device) {
  const int place = device.value_or(kAnyPlace);
  const std::optional<DType> expected = dtype ? std::optional<DType>(parse_dtype_arg("dtype", *dtype)) : std::nullopt;
  nb::dict out;
  if (ndim == 2) {
    const MatrixView view = matrix_view(tensor, name.c_str(), expected, place);
    out["dtype"] = dtype_name(view.dtype);
    out["shape"] = nb::make_tuple(view.rows, view.cols);
    out["row_stride"] = view.row_stride;
  } else if (ndim == 1) {
    const VectorView view = vector_view(tensor, name.c_str(), expected, place);
    out["dtype"] = dtype_name(view.dtype);
    out["shape"] = nb::make_tuple(view.size);
  } else {
    throw nb::value_error("ndim: 1 or 2");
  }
  return out;
}

}  // namespace

std::optional<DType> dtype_of(const Tensor& tensor) {
  const nb::dlpack::dtype raw = tensor.dtype();
  if (raw.lanes != 1) return std::nullopt;
  const auto code = static_cast<nb::dlpack::dtype_code>(raw.code);
  if (code == nb::dlpack::dtype_code::Bfloat && raw.bits == 16) return DType::kBF16;
  if (code == nb::dlpack::dtype_code::Float && raw.bits == 16) return DType::kFP16;
  if (code == nb::dlpack::dtype_code::Float && raw.bits == 32) return DType::kFP32;
  if (code == nb::dlpack::dtype_code::Int && raw.bits == 32) return DType::kInt32;
  if (code == nb::dlpack::dtype_code::Int && raw.bits == 64) return DType::kInt64;
  return std::nullopt;
}

MatrixView matrix_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device) {
  check_common(tensor, name, dtype, device, 2);
  const auto rows = static_cast<std::int64_t>(tensor.shape(0));
  const auto cols = static_cast<std::int64_t>(tensor.shape(1));
  // A dimension of extent 1 may carry any stride (PyTorch leaves them arbitrary).
  const bool unit_columns = cols <= 1 || tensor.stride(1) == 1;
  std::int64_t row_stride = rows <= 1 ? cols : tensor.stride(0);
  if (!unit_columns || row_stride < cols) {
    throw nb::value_error((std::string(name) + ": expected rows of contiguous elements (strides [>= " +
                           std::to_string(cols) + ", 1]), got strides [" + std::to_string(tensor.stride(0)) + ", " +
                           std::to_string(tensor.stride(1)) + "]; pass .contiguous()").c_str());
  }
  return MatrixView{const_cast<void*>(tensor.data()), *dtype_of(tensor), rows, cols, row_stride};
}

VectorView vector_view(const Tensor& tensor, const char* name, std::optional<DType> dtype, int device) {
  check_common(tensor, name, dtype, device, 1);
  const auto size = static_cast<std::int64_t>(tensor.shape(0));
  if (size > 1 && tensor.stride(0) != 1) {
    throw nb::value_error((std::string(name) + ": expected a contiguous vector (stride 1), got stride " +
                           std::to_string(tensor.stride(0)) + "; pass .contiguous()").c_str());
  }
  return VectorView{const_cast<void*>(tensor.data()), *dtype_of(tensor), size};
}

MatrixView matrix_view(const OutputTensor& tensor, const char* name, std::optional<DType> dtype, int device) {
  return matrix_view(writable_tensor(tensor, name), name, dtype, device);
}

VectorView vector_view(const OutputTensor& tensor, const char* name, std::optional<DType> dtype, int device) {
  return vector_view(writable_tensor(tensor, name), name, dtype, device);
}

DType parse_dtype_arg(const char* what, const std::string& text) {
  // str(torch.bfloat16) is "torch.bfloat16": a torch dtype names the same dtypes.
  constexpr std::string_view kTorchPrefix = "torch.";
  const std::string_view name =
      std::string_view(text).starts_with(kTorchPrefix) ? std::string_view(text).substr(kTorchPrefix.size()) : text;
  if (auto dtype = parse_dtype(name)) return *dtype;
  throw nb::value_error((std::string(what) + ": unknown dtype '" + text +
                         "', expected bf16, fp16, fp32, int32 or int64 (or the torch dtype of one)").c_str());
}

DType dtype_arg(const char* what, nb::handle value) {
  if (nb::isinstance<nb::str>(value)) return parse_dtype_arg(what, nb::cast<std::string>(value));
  const std::string module = nb::cast<std::string>(nb::str(value.type().attr("__module__")));
  if (module == "torch") return parse_dtype_arg(what, nb::cast<std::string>(nb::str(value)));
  const std::string got = nb::cast<std::string>(nb::str(value.type().attr("__name__")));
  throw nb::type_error((std::string(what) + ": expected a dtype name such as 'bf16' or a torch dtype, got " + got)
                           .c_str());
}

void bind_tensor_views(nb::module_& m) {
  // For the tests: the view a tensor converts to, or the error it raises, as an input
  // (_describe_tensor) or as an output (_describe_output), through the bindings' own conversions.
  m.def("_describe_tensor", &describe<Tensor>, nb::arg("tensor"), nb::arg("name") = "tensor",
        nb::arg("dtype") = nb::none(), nb::arg("ndim") = 2, nb::arg("device") = nb::none());
  m.def("_describe_output", &describe<OutputTensor>, nb::arg("tensor"), nb::arg("name") = "tensor",
        nb::arg("dtype") = nb::none(), nb::arg("ndim") = 2, nb::arg("device") = nb::none());
}

}  // namespace shardjit::python
