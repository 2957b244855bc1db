#include "runtime/cache/tuning_store.hpp"

#include <algorithm>
#include <charconv>
#include <locale>
#include <sstream>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/sha256.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::string_view kHeader = "shardjit-tuning 1";
// A record is a few hundred bytes; a larger file is read as empty, i.e. not a record.
constexpr std::uint64_t kMaxRecordBytes = 1 << 20;

// A value ends at the line's end: keys, device names and choices hold no newline.
void check_one_line(std::string_view what, std::string_view value) {
  if (value.empty() || value.find('\n') != std::string_view::npos) {
    throw Error(ErrorCode::kInvalidArgument,
                "tuning record: the " + std::string(what) + " must be one non-empty line, got '" + std::string(value) + "'");
  }
}

std::optional<double> parse_ms(std::string_view text) {
  double value = 0.0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !(value >= 0.0)) return std::nullopt;
  return value;
}

}  // namespace

std::string format_tuning_record(const TuningRecord& record) {
  check_one_line("key", record.key);
  check_one_line("device", record.device);
  check_one_line("choice", record.choice);
  std::ostringstream text;
  text.imbue(std::locale::classic());  // "7.25" whatever locale the program set: the parser reads C numbers
  text << kHeader << "\nkey " << record.key << "\ndevice " << record.device << "\nchoice " << record.choice << '\n';
  for (const auto& [candidate, ms] : record.times_ms) {
    check_one_line("candidate", candidate);
    if (candidate.find(' ') != std::string::npos) {
      throw Error(ErrorCode::kInvalidArgument, "tuning record: candidate '" + candidate + "' holds a space");
    }
    text << "time " << candidate << ' ' << ms << '\n';
  }
  return text.str();
}

std::optional<TuningRecord> parse_tuning_record(std::string_view text) {
  TuningRecord record;
  bool header = false;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (!header) {
      if (line != kHeader) return std::nullopt;
      header = true;
      continue;
    }
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    const std::string_view field = line.substr(0, space);
    const std::string_view value = line.substr(space + 1);
    if (field == "key") {
      record.key = value;
    } else if (field == "device") {
      record.device = value;
    } else if (field == "choice") {
      record.choice = value;
    } else if (field == "time") {
      const std::size_t split = value.rfind(' ');
      if (split == std::string_view::npos) return std::nullopt;
      const std::optional<double> ms = parse_ms(value.substr(split + 1));
      if (!ms) return std::nullopt;
      record.times_ms.emplace_back(std::string(value.substr(0, split)), *ms);
    } else {
      return std::nullopt;
    }
  }
  if (!header || record.key.empty() || record.choice.empty()) return std::nullopt;
  return record;
}

std::filesystem::path tuning_record_path(const std::filesystem::path& cache_dir, std::string_view key) {
  return cache_tuning_dir(cache_dir) / (sha256_hex(key) + ".txt");
}

std::optional<TuningRecord> load_tuning_record(const std::filesystem::path& cache_dir, std::string_view key) {
  const std::filesystem::path path = tuning_record_path(cache_dir, key);
  std::optional<FileBytes> file;
  try {
    file = read_whole_file(path, kMaxRecordBytes);
  } catch (const Error& e) {
    log().warn("tuning record {} is ignored: {}", path.string(), e.what());
    return std::nullopt;
  }
  if (!file) return std::nullopt;
  std::optional<TuningRecord> record = parse_tuning_record(file->bytes);
  if (!record) {
    log().warn("tuning record {} is ignored: it is not a shardjit-tuning 1 record", path.string());
    return std::nullopt;
  }
  if (record->key != key) {
    log().warn("tuning record {} is ignored: it holds the key '{}', not '{}'", path.string(), record->key, key);
    return std::nullopt;
  }
  return record;
}

void save_tuning_record(const std::filesystem::path& cache_dir, const TuningRecord& record) {
  write_file_atomically(tuning_record_path(cache_dir, record.key), format_tuning_record(record));
}

namespace {

// The record files of the folder (name ending in .txt, not a temporary file), sorted.
std::vector<std::filesystem::path> tuning_files(const std::filesystem::path& cache_dir) {
  std::vector<std::filesystem::path> paths;
  std::error_code error;
  std::filesystem::directory_iterator it(cache_tuning_dir(cache_dir), error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (it->path().extension() == ".txt" && !is_temp_file_name(name)) paths.push_back(it->path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

std::vector<TuningFile> list_tuning_records(const std::filesystem::path& cache_dir) {
  std::vector<TuningFile> files;
  for (const std::filesystem::path& path : tuning_files(cache_dir)) {
    TuningFile file{path, std::nullopt};
    try {
      if (std::optional<FileBytes> bytes = read_whole_file(path, kMaxRecordBytes)) {
        file.record = parse_tuning_record(bytes->bytes);
      }
    } catch (const Error&) {
      // Unreadable: listed without a record, as a file that is never used.
    }
    // A record is only ever found under its own key's name.
    if (file.record && tuning_record_path(cache_dir, file.record->key) != path) file.record.reset();
    files.push_back(std::move(file));
  }
  return files;
}

std::size_t remove_tuning_records(const std::filesystem::path& cache_dir) {
  std::size_t removed = 0;
  for (const std::filesystem::path& path : tuning_files(cache_dir)) {
    std::error_code error;
    if (!std::filesystem::remove(path, error) && error) {
      throw Error(ErrorCode::kCacheError, "cannot remove tuning record '" + path.string() + "': " + error.message());
    }
    ++removed;
  }
  return removed;
}

}  // namespace shardjit
