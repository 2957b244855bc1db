// The few fields of a Hugging Face config.json that decide which kernels a model needs: the
// hidden size and vocabulary of its LM head, and the dtype it is stored in.
//
// Multimodal configs (Llama 4, Gemma 3, Qwen2.5-VL, ...) keep the language model's fields under
// "text_config"; those win over top-level ones, because the LM head belongs to the text model.
// Newer transformers releases write "dtype" where older ones wrote "torch_dtype"; both are read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "shardjit/dtype.hpp"

namespace shardjit::cli {

struct ModelConfig {
  std::string name;      // where it came from (the file), for messages
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  std::optional<std::string> dtype_text;  // torch_dtype / dtype as written, when present
};

// Parses config.json text. Throws Error(kInvalidArgument) naming `name`, the field and what was
// expected: malformed JSON, a key given twice in one object, a missing hidden_size or
// vocab_size, or one that is not a positive integer.
ModelConfig parse_model_config(std::string_view text, const std::string& name);

// Reads and parses a config file (or a model folder's config.json). Error(kInvalidArgument) for a
// missing or unreadable file, one that is not a regular file (a device, a FIFO: never read or
// waited on) and one over 16 MiB (refused before reading).
ModelConfig load_model_config(const std::filesystem::path& path);

// The dtype the model's weights are stored in: its dtype_text, or bf16 when it has none.
// Throws Error(kInvalidArgument) when the text is not a floating-point dtype shardjit knows,
// telling the caller to pass --dtype instead.
DType model_dtype(const ModelConfig& config);

}  // namespace shardjit::cli
