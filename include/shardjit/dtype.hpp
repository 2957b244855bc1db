// Element types that cross the API. The names are the ones the CLI and config files use.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace shardjit {

enum class DType : int { kBF16 = 0, kFP16 = 1, kFP32 = 2, kInt32 = 3, kInt64 = 4 };

// "bf16", "fp16", "fp32", "int32", "int64".
const char* dtype_name(DType dtype) noexcept;
std::size_t dtype_size(DType dtype) noexcept;
bool dtype_is_float(DType dtype) noexcept;

// Accepts the names above and the common spellings of model configs
// ("bfloat16", "float16", "half", "float32", "float").
std::optional<DType> parse_dtype(std::string_view text);

}  // namespace shardjit
