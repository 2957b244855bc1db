// `shardjit ls`, `verify` and `gc`: look into and maintain the disk cache without compiling
// anything. ls and verify open the cache read-only, so that they never create or change it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "shardjit/error.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/format.hpp"

namespace shardjit::cli {
namespace {

namespace fs = std::filesystem;

// Entry keys are 64 hex characters; the first 12 tell entries apart in a table.
constexpr std::size_t kShortKey = 12;

std::unique_ptr<DiskCache> open_for_write(const RuntimeConfig& config) {
  // A cache that does not exist holds nothing to remove; do not create one just to find that out.
  return open_disk_cache(config, fs::exists(config.cache_dir));
}

void print_entries_json(const std::vector<DiskEntryInfo>& entries) {
  nlohmann::json list = nlohmann::json::array();
  for (const DiskEntryInfo& entry : entries) {
    list.push_back({{"key", entry.key},
                    {"template", entry.spec_text},
                    {"arch", entry.arch},
                    {"size_bytes", entry.size_bytes},
                    {"last_use", format_local_time(entry.last_use, true)},
                    {"path", entry.path.string()}});
  }
  std::printf("%s\n", list.dump(2).c_str());
}

void print_entries_table(const std::vector<DiskEntryInfo>& entries, const DiskCache& cache) {
  if (entries.empty()) {
    std::printf("no kernels in %s\n", cache.dir().string().c_str());
    return;
  }
  std::size_t arch_width = 4;
  for (const DiskEntryInfo& entry : entries) arch_width = std::max(arch_width, entry.arch.size());
  std::printf("%s  %s  %s  %s  %s\n", pad("KEY", kShortKey).c_str(), pad("ARCH", arch_width).c_str(),
              pad("SIZE", 10).c_str(), pad("LAST USE", 19).c_str(), "TEMPLATE");
  std::uint64_t total = 0;
  for (const DiskEntryInfo& entry : entries) {
    std::printf("%s  %s  %s  %s  %s\n", entry.key.substr(0, kShortKey).c_str(),
                pad(entry.arch, arch_width).c_str(), pad(format_bytes(entry.size_bytes), 10).c_str(),
                format_local_time(entry.last_use, false).c_str(), entry.spec_text.c_str());
    total += entry.size_bytes;
  }
  std::printf("%zu kernels, %s in %s\n", entries.size(), format_bytes(total).c_str(),
              cache.dir().string().c_str());
}

int run_ls(const GlobalOptions& globals, bool json) {
  std::unique_ptr<DiskCache> cache = open_disk_cache(resolve_cli_config(globals), false);
  const std::vector<DiskEntryInfo> entries = cache->list();
  if (json) {
    print_entries_json(entries);
  } else {
    print_entries_table(entries, *cache);
  }
  return kExitOk;
}

int run_verify(const GlobalOptions& globals, bool remove) {
  const RuntimeConfig config = resolve_cli_config(globals);
  std::unique_ptr<DiskCache> cache = remove ? open_for_write(config) : open_disk_cache(config, false);
  const VerifyResult result = cache->verify(remove && cache->writable());
  std::printf("verify: %zu kernels: %zu ok, %zu bad\n", result.ok + result.bad.size(), result.ok,
              result.bad.size());
  for (const auto& [path, reason] : result.bad) {
    std::string outcome;
    if (remove) outcome = " (removed)";
    for (const auto& [kept, why] : result.not_removed) {
      if (kept == path) outcome = " (NOT removed: " + why + ")";
    }
    std::printf("bad: %s: %s%s\n", path.string().c_str(), reason.c_str(), outcome.c_str());
  }
  if (!result.bad.empty() && !remove) {
    std::printf("run 'shardjit verify --remove' to delete them; they are rebuilt when next needed\n");
  }
  if (!result.not_removed.empty()) {
    std::fprintf(stderr, "verify: %zu bad entries could not be removed; remove them by hand\n",
                 result.not_removed.size());
  }
  return result.bad.empty() ? kExitOk : kExitFailed;
}

int run_gc(const GlobalOptions& globals, const std::optional<std::string>& max_size) {
  const RuntimeConfig config = resolve_cli_config(globals);
  std::uint64_t limit = config.cache_max_bytes;
  if (max_size) {
    auto parsed = parse_bytes(*max_size);
    if (!parsed) {
      throw Error(ErrorCode::kInvalidArgument, "--max-size '" + *max_size +
                                                   "' is not valid; expected a byte count such as 2G, 500M or 4096");
    }
    limit = *parsed;
  }
  std::unique_ptr<DiskCache> cache = open_for_write(config);
  if (!cache->writable()) {
    std::printf("gc: no kernel cache at %s; nothing to remove\n", config.cache_dir.c_str());
    return kExitOk;
  }
  const GcResult result = cache->gc(limit);
  const std::uint64_t freed = result.bytes_before > result.bytes_after ? result.bytes_before - result.bytes_after : 0;
  std::printf("gc: removed %zu kernels (%s); the cache holds %s (was %s, limit %s)\n", result.removed,
              format_bytes(freed).c_str(), format_bytes(result.bytes_after).c_str(),
              format_bytes(result.bytes_before).c_str(), format_bytes(limit).c_str());
  if (result.removed_bad > 0) {
    std::printf("gc: removed %zu bad entries (they did not verify)\n", result.removed_bad);
  }
  for (const auto& [path, why] : result.not_removed) {
    std::fprintf(stderr, "gc: cannot remove the bad entry %s: %s\n", path.string().c_str(), why.c_str());
  }
  if (result.removed_temp_files > 0) {
    std::printf("gc: removed %zu stale temporary files left by interrupted writers\n", result.removed_temp_files);
  }
  if (result.removed_lock_files > 0) {
    std::printf("gc: removed %zu lock files of kernels that have no entry\n", result.removed_lock_files);
  }
  return result.not_removed.empty() ? kExitOk : kExitFailed;
}

}  // namespace

Command add_ls_command(CLI::App& app, const GlobalOptions& globals) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("ls", "List the kernels in the disk cache");
  sub->add_flag("--json", *json, "Print a JSON array instead of a table");
  return Command{sub, [&globals, json] { return run_ls(globals, *json); }};
}

Command add_verify_command(CLI::App& app, const GlobalOptions& globals) {
  auto remove = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("verify", "Check every cache entry; exit 1 if any is bad");
  sub->add_flag("--remove", *remove, "Delete the bad entries (they are rebuilt when next needed)");
  return Command{sub, [&globals, remove] { return run_verify(globals, *remove); }};
}

Command add_gc_command(CLI::App& app, const GlobalOptions& globals) {
  auto max_size = std::make_shared<std::optional<std::string>>();
  CLI::App* sub = app.add_subcommand("gc", "Remove bad entries, then evict least recently used kernels down to a size");
  sub->add_option("--max-size", *max_size,
                  "Size to keep the cache under, e.g. 2G or 500M (default: SHARDJIT_CACHE_MAX_BYTES)");
  return Command{sub, [&globals, max_size] { return run_gc(globals, *max_size); }};
}

}  // namespace shardjit::cli
