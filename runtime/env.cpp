#include "runtime/env.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <filesystem>

#include "common/stream_k.cuh"
#include "runtime/cache/trusted_folder.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::array<EnvKnob, 20> kKnobs{{
    {"SHARDJIT_CACHE_DIR", "path", "$XDG_CACHE_HOME/shardjit, else ~/.cache/shardjit, else $TMPDIR/shardjit-cache",
     "Folder of the on-disk kernel cache (created 0700; refused if others can write it)."},
    {"SHARDJIT_JIT", "bool", "1",
     "0: cache-only mode; a kernel missing from the cache is an error naming the prewarm command."},
    {"SHARDJIT_TEMPLATE_DIR", "path", "(embedded)",
     "Load kernel templates from this folder instead of the copies built into the library. Like the "
     "cache folder, it (its subfolders and *.cuh files) must be yours or root's and writable by no one "
     "else."},
    {"SHARDJIT_CACHE_MAX_BYTES", "bytes", "4G",
     "Size cap of the disk cache; least recently used entries are evicted past it."},
    {"SHARDJIT_DUMP_DIR", "path", "(off)",
     "Write the source, PTX, CUBIN and NVRTC's phase times (.time.csv) of every compile into this folder "
     "(created 0700; refused, with one warning, where the cache folder would be; compiles go on without dumps)."},
    {"SHARDJIT_LOG_LEVEL", "level", "warn",
     "Level of the 'shardjit' logger, the process's one: trace, debug, info, warn, error, critical, off. A "
     "runtime made under it (or with a log level) sets it; one made without leaves it as it is."},
    {"SHARDJIT_ARCH", "string", "(the device's)",
     "Default compile target of `shardjit prewarm`, such as sm_80 or sm_90a (default: the arch of the "
     "current device). Ops always compile for the arch of their own device."},
    {"SHARDJIT_COMPILE_JOBS", "int", "0",
     "Most kernels a runtime compiles at once (an op's missing kernels build side by side); 0: one "
     "per hardware thread."},
    {"SHARDJIT_PEER_BLOCKS", "int", "0",
     "Most blocks (SMs) a peer-memory kernel takes (ReduceScatter, MoeCombine); 0: one per SM. "
     "The smallest value of the ranks is used."},
    {"SHARDJIT_PEER_LINES", "bool", "1",
     "0: small peer ReduceScatters send 8-byte words that each carry a flag (twice the bytes) even "
     "where every GPU pair is on NVLink, instead of 128-byte lines with one flag each. Any rank's 0 "
     "turns the lines off for all."},
    {"SHARDJIT_HOPPER_PATH", "bool", "1",
     "0: LinearLogp runs the portable mma.sync main loop on Hopper (sm_90a) too, instead of wgmma. "
     "Set it for prewarm as for the servers: the two paths are different kernels."},
    {"SHARDJIT_AUTOTUNE", "bool", "0",
     "1: a LinearLogp op built without a tuning record in the cache times its forward tile "
     "candidates once and records the fastest there (needs JIT). Records are used either way; "
     "`shardjit prewarm --tune` makes them ahead of a deployment."},
    {"SHARDJIT_FWD_TILE", "string", "(the rule's)",
     "For experiments: the forward tile of single-GPU LinearLogp ops, by its tuning-record name "
     "(e.g. 64x256x32x3-mma or 128x256x64x4-wgmma), over the default and any tuning record; one of "
     "the op's tile candidates. Compiles kernels a prewarm did not."},
    {"SHARDJIT_FWD_SPLITS", "int", "0",
     "For experiments: the vocabulary split count of single-GPU LinearLogp forwards, 1 to 1024, "
     "over the rule's choice (kept at most the vocabulary tiles and what one combine merges); "
     "0: the rule's."},
    {"SHARDJIT_FWD_MERGE", "string", "auto",
     "For experiments: where the Hopper loop's single-GPU LinearLogp forward merges its partials. "
     "1: in the forward kernel's last block of each row tile; 0: in a combine kernel after it; "
     "auto: the rule's (in the kernel where a row tile's merge is one pass of its threads)."},
    {"SHARDJIT_FWD_ROWS_AS_N", "bool", "1",
     "For experiments: 0 runs the single-GPU LinearLogp forward on tiles of 128 rows at every call, "
     "instead of the 136-, 152- and 168-row tiles that take the rows as wgmma's N where the rule finds them faster "
     "(an op still prepares their kernels, as prewarm does; an op pinned to one of those tiles by "
     "SHARDJIT_FWD_TILE runs it regardless)."},
    {"SHARDJIT_SPLIT_PARTIAL_WAVES", "bool", "1",
     "For experiments: 0 splits the Hopper backward kernels' tiles along K only where they fill at "
     "most half the GPU, instead of wherever the last wave of whole tiles would leave a quarter of "
     "the launch idle (then the last wave's tiles are split among all the blocks)."},
    {"SHARDJIT_SPLIT_CLUSTERS", "string", "auto",
     "For experiments: 0 launches the Hopper GEMMs split along K over a few row tiles (grad_hidden "
     "at a few hundred rows) without clusters, whose blocks share the B slices that their row tiles "
     "read, and GEMMs of less than a wave unsplit; 1 to 8 takes clusters of that many blocks "
     "wherever they divide the row tiles (1: the same splits, each block alone, on as many blocks as "
     "fit), instead of the rule's (auto)."},
    {"SHARDJIT_GEMM_ROWS_AS_N", "bool", "1",
     "For experiments: 0 runs the LinearLogp backward's grad_hidden on its 128 x 256 tiles at every "
     "call, instead of the tiles that take a few hundred rows as wgmma's N where the rule finds them "
     "faster (an op still prepares their kernels, as prewarm does)."},
    {"SHARDJIT_BWD_CHUNK_WAVES", "bool", "1",
     "For experiments: 0 cuts the LinearLogp backward's vocabulary into the widest chunks the dZ "
     "budget allows, instead of the width, down to three quarters of it, whose kernels fill their "
     "waves best."},
}};

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string default_cache_dir() {
  if (auto xdg = env("XDG_CACHE_HOME")) return (std::filesystem::path(*xdg) / "shardjit").string();
  if (auto home = env("HOME")) return (std::filesystem::path(*home) / ".cache" / "shardjit").string();
  return (std::filesystem::temp_directory_path() / "shardjit-cache").string();
}

// What a bool knob accepts (parse_bool), as its error says it.
constexpr const char* kBoolExpected = "0 or 1 (or false/true, off/on, no/yes)";

[[noreturn]] void bad_value(const char* name, const std::string& value, const char* expected) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string(name) + "='" + value + "' is not valid; expected " + expected);
}

std::string lower_case(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

}  // namespace

std::span<const EnvKnob> env_knobs() { return kKnobs; }

std::optional<bool> parse_bool(const std::string& text) {
  const std::string lower = lower_case(text);
  if (lower == "1" || lower == "true" || lower == "on" || lower == "yes") return true;
  if (lower == "0" || lower == "false" || lower == "off" || lower == "no") return false;
  return std::nullopt;
}

std::optional<std::uint64_t> parse_bytes(const std::string& text) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string suffix = text.substr(used);
  std::uint64_t scale = 1;
  if (suffix == "" || suffix == "B") scale = 1;
  else if (suffix == "K" || suffix == "KiB") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB") scale = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB") scale = 1ull << 30;
  else if (suffix == "T" || suffix == "TiB") scale = 1ull << 40;
  else return std::nullopt;
  if (value > UINT64_MAX / scale) return std::nullopt;
  return value * scale;
}

namespace {

// The option set in code, else the environment variable as `parse` reads it (a value it cannot
// read names the variable and what was expected), else none.
template <class T, class Parse>
std::optional<T> option_or_env(const std::optional<T>& option, const char* name, Parse parse, const char* expected) {
  if (option) return option;
  const std::optional<std::string> text = env(name);
  if (!text) return std::nullopt;
  const std::optional<T> parsed = parse(*text);
  if (!parsed) bad_value(name, *text, expected);
  return parsed;
}

// As above, else `fallback`.
template <class T, class Parse>
T option_or_env(const std::optional<T>& option, const char* name, Parse parse, const char* expected, T fallback) {
  return option_or_env(option, name, parse, expected).value_or(fallback);
}

// A whole decimal number from `low` to `high`, nothing else in the text.
std::optional<int> parse_int_in(const std::string& text, long low, long high) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < low || value > high) return std::nullopt;
  return static_cast<int>(value);
}

std::optional<int> parse_split_count(const std::string& text) { return parse_int_in(text, 0, 1024); }

// "auto" (-1) or a boolean (0, 1).
std::optional<int> parse_auto_or_bool(const std::string& text) {
  if (lower_case(text) == "auto") return -1;
  const std::optional<bool> value = parse_bool(text);
  if (!value) return std::nullopt;
  return *value ? 1 : 0;
}

std::optional<int> parse_block_count(const std::string& text) { return parse_int_in(text, 0, 4096); }

// SHARDJIT_SPLIT_CLUSTERS: "auto" (-1), 0 (none) or a cluster's blocks up to the portable limit.
std::optional<int> parse_cluster_blocks(const std::string& text) {
  if (lower_case(text) == "auto") return -1;
  return parse_int_in(text, 0, kernels::kStreamKMaxClusterBlocks);
}

}  // namespace

RuntimeConfig resolve_config(const RuntimeOptions& options) {
  RuntimeConfig config;
  config.cache_dir = options.cache_dir.value_or(env("SHARDJIT_CACHE_DIR").value_or(default_cache_dir()));
  config.jit = option_or_env(options.jit, "SHARDJIT_JIT", parse_bool, kBoolExpected, true);
  config.template_dir = options.template_dir ? options.template_dir : env("SHARDJIT_TEMPLATE_DIR");
  config.cache_max_bytes = option_or_env(options.cache_max_bytes, "SHARDJIT_CACHE_MAX_BYTES", parse_bytes,
                                         "a byte count such as 4G or 500M", std::uint64_t{4} << 30);
  config.dump_dir = options.dump_dir ? options.dump_dir : env("SHARDJIT_DUMP_DIR");
  config.log_level = option_or_env<std::string>(
      options.log_level, "SHARDJIT_LOG_LEVEL",
      [](const std::string& text) { return is_log_level(text) ? std::optional<std::string>(text) : std::nullopt; },
      "trace, debug, info, warn, error, critical or off");
  config.arch = env("SHARDJIT_ARCH");
  constexpr const char* kCompileJobsExpected = "a thread count from 0 (one per hardware thread) to 4096";
  static_assert(kMaxCompileJobs == 4096, "kCompileJobsExpected and parse_block_count say 4096");
  config.compile_jobs =
      option_or_env(options.compile_jobs, "SHARDJIT_COMPILE_JOBS", parse_block_count, kCompileJobsExpected, 0);
  config.peer_blocks = option_or_env(options.peer_blocks, "SHARDJIT_PEER_BLOCKS", parse_block_count,
                                     "a block count from 0 (one per SM) to 4096", 0);
  config.peer_lines = option_or_env(options.peer_lines, "SHARDJIT_PEER_LINES", parse_bool, kBoolExpected, true);
  config.hopper_path = option_or_env(options.hopper_path, "SHARDJIT_HOPPER_PATH", parse_bool, kBoolExpected, true);
  config.autotune = option_or_env(options.autotune, "SHARDJIT_AUTOTUNE", parse_bool, kBoolExpected, false);
  // Environment values cannot hold a NUL byte, options set in code (C++, Python) can.
  check_path_text(config.cache_dir, "the cache folder (cache_dir, SHARDJIT_CACHE_DIR)");
  if (config.template_dir) check_path_text(*config.template_dir, "the template folder (template_dir, SHARDJIT_TEMPLATE_DIR)");
  if (config.dump_dir) check_path_text(*config.dump_dir, "the dump folder (dump_dir, SHARDJIT_DUMP_DIR)");
  // A tile name is checked against the op's candidates when an op is built (tuning.cpp).
  config.fwd_tile = env("SHARDJIT_FWD_TILE").value_or("");
  config.fwd_splits = option_or_env(std::optional<int>{}, "SHARDJIT_FWD_SPLITS", parse_split_count,
                                    "a split count from 0 (the rule's) to 1024", 0);
  config.fwd_merge = option_or_env(std::optional<int>{}, "SHARDJIT_FWD_MERGE", parse_auto_or_bool,
                                   "auto, or a boolean such as 0 or 1", -1);
  config.fwd_rows_as_n =
      option_or_env(std::optional<bool>{}, "SHARDJIT_FWD_ROWS_AS_N", parse_bool, kBoolExpected, true);
  config.split_partial_waves =
      option_or_env(std::optional<bool>{}, "SHARDJIT_SPLIT_PARTIAL_WAVES", parse_bool, kBoolExpected, true);
  config.split_clusters = option_or_env(std::optional<int>{}, "SHARDJIT_SPLIT_CLUSTERS", parse_cluster_blocks,
                                        "auto (the rule's), 0 (none) or a cluster's blocks from 1 to 8", -1);
  config.bwd_chunk_waves =
      option_or_env(std::optional<bool>{}, "SHARDJIT_BWD_CHUNK_WAVES", parse_bool, kBoolExpected, true);
  config.gemm_rows_as_n =
      option_or_env(std::optional<bool>{}, "SHARDJIT_GEMM_ROWS_AS_N", parse_bool, kBoolExpected, true);
  if (config.peer_blocks < 0) bad_value("RuntimeOptions::peer_blocks", std::to_string(config.peer_blocks), ">= 0");
  if (config.compile_jobs < 0 || config.compile_jobs > kMaxCompileJobs) {
    bad_value("RuntimeOptions::compile_jobs", std::to_string(config.compile_jobs), kCompileJobsExpected);
  }
  return config;
}

}  // namespace shardjit
