#include "tools/cli/prewarm_request.hpp"

#include <algorithm>
#include <charconv>

#include "runtime/compile/compile_pool.hpp"
#include "shardjit/error.hpp"
#include "tools/cli/model_config.hpp"

namespace shardjit::cli {
namespace {

[[noreturn]] void bad_option(const char* option, const std::string& value, const std::string& expected) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string(option) + " '" + value + "' is not valid; expected " + expected);
}

// The items of a comma-separated list option, from every use of it. An empty item (`1,,2`, a
// comma at either end) is refused: it is a typo, not a value to skip.
std::vector<std::string> list_items(const char* option, const std::vector<std::string>& words,
                                    const std::string& expected) {
  std::vector<std::string> items;
  for (const std::string& word : words) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = word.find(',', start);
      std::string item = word.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.empty()) bad_option(option, word, expected + " (with no empty item between commas)");
      items.push_back(std::move(item));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return items;
}

std::optional<std::int64_t> parse_integer(const std::string& text) {
  std::int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A size option: a whole number of at least 1 (the shapes' own limits are the planner's to check).
std::optional<std::int64_t> parse_size(const char* option, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  auto value = parse_integer(*text);
  if (!value || *value < 1) bad_option(option, *text, "a whole number from 1 to 9223372036854775807");
  return value;
}

constexpr const char* kTpExpected = "TP degrees from 1 to 1024, separated by commas, e.g. --tp 1,2,4,8";

std::vector<int> parse_tp(const std::vector<std::string>& words) {
  std::vector<int> degrees;
  for (const std::string& text : list_items("--tp", words, kTpExpected)) {
    auto value = parse_integer(text);
    if (!value || *value < 1 || *value > 1024) {
      bad_option("--tp", text, kTpExpected);
    }
    degrees.push_back(static_cast<int>(*value));
  }
  return degrees;
}

std::vector<DType> parse_float_dtypes(const std::vector<std::string>& words) {
  std::vector<DType> dtypes;
  for (const std::string& text : list_items("--dtype", words, "bf16, fp16 or fp32, separated by commas")) {
    auto dtype = parse_dtype(text);
    if (!dtype || !dtype_is_float(*dtype)) bad_option("--dtype", text, "bf16, fp16 or fp32, separated by commas");
    dtypes.push_back(*dtype);
  }
  return dtypes;
}

std::vector<DType> parse_targets(const std::vector<std::string>& words) {
  std::vector<DType> dtypes;
  for (const std::string& text : list_items("--targets", words, "int64 or int32, separated by commas")) {
    auto dtype = parse_dtype(text);
    if (dtype != DType::kInt32 && dtype != DType::kInt64) {
      bad_option("--targets", text, "int64 or int32, separated by commas");
    }
    dtypes.push_back(*dtype);
  }
  return dtypes;
}

std::vector<std::optional<DType>> parse_bias(const std::vector<std::string>& words) {
  std::vector<std::optional<DType>> dtypes;
  for (const std::string& text : list_items("--bias", words, "none, bf16, fp16 or fp32, separated by commas")) {
    if (text == "none") {
      dtypes.push_back(std::nullopt);
      continue;
    }
    auto dtype = parse_dtype(text);
    if (!dtype || !dtype_is_float(*dtype)) bad_option("--bias", text, "none, bf16, fp16 or fp32, separated by commas");
    dtypes.push_back(*dtype);
  }
  return dtypes;
}

std::vector<bool> parse_entropy(const std::string& text) {
  if (text == "off") return {false};
  if (text == "on") return {true};
  if (text == "both") return {false, true};
  bad_option("--entropy", text, "off, on or both");
}

std::optional<ShardRange> parse_shard(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::size_t colon = text->find(':');
  auto start = parse_integer(text->substr(0, colon));
  auto size = colon == std::string::npos ? std::nullopt : parse_integer(text->substr(colon + 1));
  if (!start || !size || *start < 0 || *size < 1) {
    bad_option("--shard", *text, "START:SIZE, the first vocabulary row of the shard and its row count, e.g. 0:32064");
  }
  return ShardRange{*start, *size};
}

std::string device_arch() {
  if (device_count() > 0) return DeviceContext(0).arch();
  throw Error(ErrorCode::kInvalidArgument,
              "no target arch given and this machine has no GPU to take it from; pass --arch, "
              "e.g. --arch sm_90a (or several: --arch sm_80,sm_90a)");
}

// --arch, else SHARDJIT_ARCH, else the arch of GPU 0; each checked against this NVRTC, and named
// by where it came from when it fails.
std::vector<std::string> target_archs(const PrewarmOptions& options, const RuntimeConfig& config) {
  std::vector<std::string> archs = list_items("--arch", options.archs, "targets such as sm_80 or sm_90a, separated by commas");
  std::string source = "--arch";
  if (archs.empty() && config.arch) {
    archs = {*config.arch};
    source = "SHARDJIT_ARCH";
  }
  if (archs.empty()) {
    archs = {device_arch()};
    source = "the arch of GPU 0";
  }
  std::vector<std::string> unique;
  for (const std::string& arch : archs) {
    try {
      NvrtcCompiler::check_arch(arch);
    } catch (const Error& error) {
      throw Error(error.code(), source + ": " + error.what());
    }
    if (std::find(unique.begin(), unique.end(), arch) == unique.end()) unique.push_back(arch);
  }
  return unique;
}

struct ModelRequest {
  ModelShape shape;
  std::vector<DType> dtypes;
};

// The models to prewarm: each config file, and the one of --hidden / --vocab. --dtype wins over a
// config's own dtype.
std::vector<ModelRequest> model_requests(const PrewarmOptions& options) {
  const std::vector<DType> forced = parse_float_dtypes(options.dtypes);
  std::vector<ModelRequest> models;
  for (const std::string& path : options.configs) {
    ModelConfig config = load_model_config(path);
    std::vector<DType> dtypes = forced.empty() ? std::vector<DType>{model_dtype(config)} : forced;
    models.push_back({ModelShape{path, config.hidden, config.vocab, 0}, dtypes});
  }
  const std::optional<std::int64_t> hidden = parse_size("--hidden", options.hidden);
  const std::optional<std::int64_t> vocab = parse_size("--vocab", options.vocab);
  const std::optional<std::int64_t> valid_vocab = parse_size("--valid-vocab", options.valid_vocab);
  if (hidden && !vocab && !options.collectives_only) {
    throw Error(ErrorCode::kInvalidArgument,
                "--hidden requires --vocab (only --collectives-only needs no vocabulary)");
  }
  if (hidden && (vocab || options.collectives_only)) {
    // The collectives depend on the hidden size only.
    std::string name = "--hidden " + std::to_string(*hidden) + (vocab ? " --vocab " + std::to_string(*vocab) : "");
    std::vector<DType> dtypes = forced.empty() ? std::vector<DType>{DType::kBF16} : forced;
    models.push_back({ModelShape{name, *hidden, vocab.value_or(1), valid_vocab.value_or(0)}, dtypes});
  }
  if (models.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "no model given; pass config.json files or --hidden H --vocab V");
  }
  return models;
}

}  // namespace

int parse_jobs(const std::optional<std::string>& jobs) {
  if (!jobs) return static_cast<int>(std::min<std::size_t>(default_compile_jobs(), 1024));
  auto value = parse_integer(*jobs);
  if (!value || *value < 1 || *value > 1024) {
    bad_option("--jobs", *jobs, "the number of parallel compiles, a whole number from 1 to 1024");
  }
  return static_cast<int>(*value);
}

std::vector<PrewarmItem> kernels_to_prewarm(const PrewarmOptions& options, const RuntimeConfig& config) {
  PrewarmRequest base;
  base.tp = parse_tp(options.tp);
  base.target_dtypes = parse_targets(options.targets);
  base.bias_dtypes = parse_bias(options.bias);
  base.entropy = parse_entropy(options.entropy);
  base.backward = options.backward;
  base.dz_fp32 = options.dz_fp32;
  base.grad_filter = options.grad_filter;
  base.collectives = options.collectives || options.collectives_only;
  base.linear_logp = !options.collectives_only;
  base.shard = parse_shard(options.shard);
  const std::vector<ModelRequest> models = model_requests(options);
  base.archs = target_archs(options, config);
  base.hopper_path = config.hopper_path;

  PrewarmItemSet items;  // models with the same shapes share their kernels
  for (const ModelRequest& model : models) {
    PrewarmRequest request = base;
    request.models = {model.shape};
    request.dtypes = model.dtypes;
    std::vector<PrewarmItem> found;
    try {
      found = prewarm_items(request);
    } catch (const Error& error) {
      throw Error(error.code(), model.shape.name + ": " + error.what());
    }
    for (PrewarmItem& item : found) items.add(std::move(item));
  }
  return items.take();
}

}  // namespace shardjit::cli
