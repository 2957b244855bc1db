#include "tools/cli/model_config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "shardjit/error.hpp"

namespace shardjit::cli {
namespace {

using nlohmann::json;

// No model's config.json comes near it; a larger file is not one.
constexpr std::uint64_t kMaxConfigBytes = std::uint64_t{16} << 20;

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
  // Keys seen in each object being parsed, to refuse a key given twice: JSON leaves its meaning
  // open, and the parser would keep the last value without a word.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t track_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == json::parse_event_t::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == json::parse_event_t::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), track_keys);
  } catch (const json::parse_error& error) {
    bad_config(name, "not valid JSON (" + strip_exception_id(error.what()) + "); expected a model's config.json");
  }
  if (!duplicate.empty()) {
    bad_config(name, "the key \"" + duplicate +
                         "\" appears twice in one object; expected each key once (which value is meant is unclear)");
  }
  return root;
}

// The bytes of a config file. Only a regular file of at most kMaxConfigBytes is read: a device
// (/dev/zero) would be read forever, a FIFO would wait for a writer.
std::string read_config_file(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) {
      throw Error(ErrorCode::kInvalidArgument,
                  "config file '" + file.string() + "' does not exist; expected a model's config.json");
    }
    throw Error(ErrorCode::kInvalidArgument,
                "cannot open config file '" + file.string() + "' for reading: " + std::strerror(error));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    throw Error(ErrorCode::kInvalidArgument, "config file '" + file.string() +
                                                 "' is not a regular file (a device, a FIFO or a socket); "
                                                 "expected a model's config.json");
  }
  const std::string too_large = "config file '" + file.string() + "' is larger than " +
                                std::to_string(kMaxConfigBytes >> 20) + " MiB; expected a model's config.json";
  if (static_cast<std::uint64_t>(info.st_size) > kMaxConfigBytes) throw Error(ErrorCode::kInvalidArgument, too_large);
  std::string text;
  char buffer[65536];
  while (true) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "cannot read config file '" + file.string() + "': " + std::strerror(errno));
    }
    if (got == 0) break;
    text.append(buffer, static_cast<std::size_t>(got));
    // It may have grown since fstat.
    if (text.size() > kMaxConfigBytes) throw Error(ErrorCode::kInvalidArgument, too_large);
  }
  return text;
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
  return parse_model_config(read_config_file(file), file.string());
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
