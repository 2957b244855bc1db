// `shardjit tuning`: the tuning records in the cache folder (runtime/cache/tuning_store.hpp), which
// forward tile each op shape chose on which device and the candidates' times; `--clear` removes
// them, so that ops tune again (with autotune on) or take their default tiles.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/tooling.hpp"
#include "tools/cli/commands.hpp"

namespace shardjit::cli {
namespace {

struct TuningOptions {
  bool json = false;
  bool clear = false;
};

void print_json(const std::vector<TuningFile>& files) {
  nlohmann::json list = nlohmann::json::array();
  for (const TuningFile& file : files) {
    if (!file.record) {
      list.push_back({{"path", file.path.string()}, {"record", nullptr}});
      continue;
    }
    nlohmann::json times = nlohmann::json::array();
    for (const auto& [tile, ms] : file.record->times_ms) times.push_back({{"tile", tile}, {"ms", ms}});
    list.push_back({{"path", file.path.string()},
                    {"key", file.record->key},
                    {"device", file.record->device},
                    {"choice", file.record->choice},
                    {"times", times}});
  }
  std::printf("%s\n", list.dump(2).c_str());
}

void print_text(const std::vector<TuningFile>& files, const std::string& dir) {
  std::size_t records = 0;
  for (const TuningFile& file : files) {
    if (!file.record) {
      std::printf("not a record (never used): %s\n", file.path.string().c_str());
      continue;
    }
    ++records;
    std::printf("%s on %s\n  %s\n", file.record->choice.c_str(), file.record->device.c_str(), file.record->key.c_str());
    for (const auto& [tile, ms] : file.record->times_ms) std::printf("  %-22s %.4f ms\n", tile.c_str(), ms);
  }
  std::printf("%zu tuning records in %s\n", records, dir.c_str());
}

int run(const GlobalOptions& globals, const TuningOptions& options) {
  const RuntimeConfig config = resolve_cli_config(globals);
  // The folder's trust rules apply as for the kernels; nothing is created.
  prepare_cache_dir(config.cache_dir, false);
  if (options.clear) {
    const std::size_t removed = remove_tuning_records(config.cache_dir);
    std::printf("tuning: removed %zu record files from %s\n", removed, config.cache_dir.c_str());
    return kExitOk;
  }
  const std::vector<TuningFile> files = list_tuning_records(config.cache_dir);
  if (options.json) {
    print_json(files);
  } else {
    print_text(files, config.cache_dir);
  }
  return kExitOk;
}

}  // namespace

Command add_tuning_command(CLI::App& app, const GlobalOptions& globals) {
  auto options = std::make_shared<TuningOptions>();
  CLI::App* sub = app.add_subcommand("tuning", "List the tuning records in the cache (the tiles ops chose, with times)");
  CLI::Option* json = sub->add_flag("--json", options->json, "Print a JSON array instead of text");
  sub->add_flag("--clear", options->clear, "Remove every record: ops tune again (autotune on) or take their default tiles")
      ->excludes(json);
  return Command{sub, [&globals, options] { return run(globals, *options); }};
}

}  // namespace shardjit::cli
