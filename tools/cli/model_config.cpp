#include "tools/cli/model_config.hpp"

#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "shardjit/error.hpp"

namespace shardjit::cli {
namespace {

using nlohmann::json;

[[noreturn]] void bad_config(const std::string& name, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, name + ": " + what);
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; the id means nothing to a
// user, the position and reason after it do.
std::string strip_exception_id(const std::string& message) {
  std::size_t end = message.find("] ");
  return end == std::string::npos ? message : message.substr(end + 2);
}

json parse_json(std::string_view text, const std::string& name) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    bad_config(name, "not valid JSON (" + strip_exception_id(error.what()) + "); expected a model's config.json");
  }
}

// The first non-null value of any of `keys`, looking under "text_config" first (the language
// model of a multimodal config), then at the top level.
const json* find_field(const json& root, std::initializer_list<const char*> keys) {
  auto text_config = root.find("text_config");
  const json* scopes[] = {text_config != root.end() && text_config->is_object() ? &*text_config : nullptr,
                          &root};
  for (const json* scope : scopes) {
    if (scope == nullptr) continue;
    for (const char* key : keys) {
      auto found = scope->find(key);
      if (found != scope->end() && !found->is_null()) return &*found;
    }
  }
  return nullptr;
}

std::int64_t positive_integer(const json& root, const char* key, const std::string& name) {
  const json* value = find_field(root, {key});
  if (value == nullptr) {
    bad_config(name, std::string("no ") + key +
                         " (looked at the top level and under text_config); expected a positive integer");
  }
  const bool fits = value->is_number_integer() &&
                    (!value->is_number_unsigned() ||
                     value->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  if (!fits || value->get<std::int64_t>() <= 0) {
    bad_config(name, std::string(key) + " is " + value->dump() + "; expected a positive integer");
  }
  return value->get<std::int64_t>();
}

std::optional<std::string> dtype_field(const json& root, const std::string& name) {
  const json* value = find_field(root, {"torch_dtype", "dtype"});
  if (value == nullptr) return std::nullopt;
  if (!value->is_string()) {
    bad_config(name, "torch_dtype is " + value->dump() + "; expected a string such as \"bfloat16\"");
  }
  return value->get<std::string>();
}

}  // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& name) {
  json root = parse_json(text, name);
  if (!root.is_object()) bad_config(name, "holds " + std::string(root.type_name()) + "; expected a JSON object");
  ModelConfig config;
  config.name = name;
  config.hidden = positive_integer(root, "hidden_size", name);
  config.vocab = positive_integer(root, "vocab_size", name);
  config.dtype_text = dtype_field(root, name);
  return config;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  // A model folder (as downloaded from the Hub) stands for the config.json inside it.
  fs::path file = fs::is_directory(path, error) ? path / "config.json" : path;
  if (!fs::exists(file, error)) {
    throw Error(ErrorCode::kInvalidArgument,
                "config file '" + file.string() + "' does not exist; expected a model's config.json");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    throw Error(ErrorCode::kInvalidArgument, "cannot open config file '" + file.string() + "' for reading");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), file.string());
}

DType model_dtype(const ModelConfig& config) {
  if (!config.dtype_text) return DType::kBF16;
  std::optional<DType> dtype = parse_dtype(*config.dtype_text);
  if (!dtype || !dtype_is_float(*dtype)) {
    throw Error(ErrorCode::kInvalidArgument,
                config.name + ": torch_dtype \"" + *config.dtype_text +
                    "\" is not a dtype shardjit builds kernels for; expected bfloat16, float16 or "
                    "float32, or pass --dtype");
  }
  return *dtype;
}

}  // namespace shardjit::cli
