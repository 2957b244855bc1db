#include "shardjit/dtype.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace shardjit {

const char* dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP32: return "fp32";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBF16:
    case DType::kFP16: return 2;
    case DType::kFP32:
    case DType::kInt32: return 4;
    case DType::kInt64: return 8;
  }
  return 0;
}

bool dtype_is_float(DType dtype) noexcept {
  return dtype == DType::kBF16 || dtype == DType::kFP16 || dtype == DType::kFP32;
}

std::optional<DType> parse_dtype(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "bf16" || lower == "bfloat16") return DType::kBF16;
  if (lower == "fp16" || lower == "float16" || lower == "half") return DType::kFP16;
  if (lower == "fp32" || lower == "float32" || lower == "float") return DType::kFP32;
  if (lower == "int32") return DType::kInt32;
  if (lower == "int64") return DType::kInt64;
  return std::nullopt;
}

}  // namespace shardjit
