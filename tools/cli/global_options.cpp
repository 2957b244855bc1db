#include "tools/cli/global_options.hpp"


namespace shardjit::cli {

RuntimeOptions runtime_options(const GlobalOptions& globals) {
  RuntimeOptions options;
  options.cache_dir = globals.cache_dir;
  options.log_level = globals.log_level;
  return options;
}

RuntimeConfig resolve_cli_config(const GlobalOptions& globals) {
  RuntimeConfig config = resolve_config(runtime_options(globals));
  if (config.log_level) set_log_level(*config.log_level);
  return config;
}

std::unique_ptr<DiskCache> open_disk_cache(const RuntimeConfig& config, bool write) {
  return std::make_unique<DiskCache>(config.cache_dir, config.cache_max_bytes, write);
}

}  // namespace shardjit::cli
