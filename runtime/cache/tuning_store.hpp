// Tuning records: what an op learned by timing a few variants of its kernels once, kept in the
// cache folder next to the kernels (<cache>/tuning/<sha256 of the key>.txt) so that later
// processes on the same kind of device reuse the choice without timing again.
//
// A record is a few lines of text, so that `cat` explains a deployment's choices:
//   shardjit-tuning 1
//   key <the op's key text>
//   device <the device it was timed on>
//   choice <the winner, in the op's own notation>
//   time <candidate> <milliseconds>      (one line per candidate timed)
// Records are published atomically (runtime/cache/atomic_file.hpp); a record that cannot be read
// or parsed, or whose key differs from the one asked for, is ignored with a warning, never
// trusted.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shardjit {

struct TuningRecord {
  std::string key;
  std::string device;
  std::string choice;
  std::vector<std::pair<std::string, double>> times_ms;  // every candidate timed, in order
};

// The record text, and its parse (nullopt when it is not a record of this version).
std::string format_tuning_record(const TuningRecord& record);
std::optional<TuningRecord> parse_tuning_record(std::string_view text);

// Where the record of `key` lives in the cache folder `cache_dir`.
std::filesystem::path tuning_record_path(const std::filesystem::path& cache_dir, std::string_view key);

// The record of `key`; nullopt when there is none (or it is unreadable: logged as a warning).
std::optional<TuningRecord> load_tuning_record(const std::filesystem::path& cache_dir, std::string_view key);

// Publishes the record (replacing any earlier one of its key). Error(kCacheError) names the file
// and the reason when it cannot be written.
void save_tuning_record(const std::filesystem::path& cache_dir, const TuningRecord& record);

// Every record file in the cache folder, sorted by path, with its record (nullopt where the file
// is not a record: such a file is never used). An absent folder holds none.
struct TuningFile {
  std::filesystem::path path;
  std::optional<TuningRecord> record;
};
std::vector<TuningFile> list_tuning_records(const std::filesystem::path& cache_dir);

// Removes every record file (ops then tune again, or take their default tiles); returns how many.
// Error(kCacheError) names a file that cannot be removed.
std::size_t remove_tuning_records(const std::filesystem::path& cache_dir);

}  // namespace shardjit
