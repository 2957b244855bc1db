// Options every subcommand shares (--cache-dir, --log-level) and the configuration and disk
// cache they resolve to.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/tooling.hpp"
#include "shardjit/runtime.hpp"

namespace shardjit::cli {

struct GlobalOptions {
  std::optional<std::string> cache_dir;  // wins over SHARDJIT_CACHE_DIR
  std::optional<std::string> log_level;  // wins over SHARDJIT_LOG_LEVEL
};

// The options a Runtime built by the tool gets.
RuntimeOptions runtime_options(const GlobalOptions& globals);

// The environment and the global options resolved into one configuration; also applies the log
// level. Throws Error(kInvalidArgument) for a bad option or environment value.
RuntimeConfig resolve_cli_config(const GlobalOptions& globals);

// The disk cache of `config`. Read-only unless `write`, so that listing or checking a cache
// never creates or changes anything; a folder that does not exist reads as an empty cache.
std::unique_ptr<DiskCache> open_disk_cache(const RuntimeConfig& config, bool write);

}  // namespace shardjit::cli
