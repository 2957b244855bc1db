#include "runtime/cache/disk_cache.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/cache_dir.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;
using test::LogCapture;
using test::test_entry;
using test::test_key;
using testing::TempDir;

constexpr std::uint64_t kNoCap = std::numeric_limits<std::uint64_t>::max();

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::size_t count_temp_files(const fs::path& dir) {
  std::size_t count = 0;
  for (const auto& file : fs::directory_iterator(cache_kernels_dir(dir))) {
    if (is_temp_file_name(file.path().filename().string())) ++count;
  }
  return count;
}

void set_age(const fs::path& path, std::chrono::seconds age) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - age);
}

// Runs body in a child process whose files may not grow past 100 bytes (the file size limit,
// standing in for a full disk), so that the limit does not outlive it; returns the child's exit
// code: body's result, 10 when the limit could not be set, 11 when body threw.
int exit_code_with_a_full_disk(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {
      100, 100
    };
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(10);
    try {
      ::_exit(body());
    } catch (...) {
      ::_exit(11);
    }
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Makes the next `count` file writes fail with `error` (atomic_file's test seam) for a scope, and
// cancels those left at its end, so that a test that stops early leaves none to the next.
class InjectedWriteFailures {
 public:
  InjectedWriteFailures(int count, int error) { fail_next_file_writes_for_testing(count, error); }
  ~InjectedWriteFailures() { fail_next_file_writes_for_testing(0, 0); }
  InjectedWriteFailures(const InjectedWriteFailures&) = delete;
  InjectedWriteFailures& operator=(const InjectedWriteFailures&) = delete;
};

// Stores a, b, c and d (entries of one size), then uses a: the least recently used are b and c,
// which are not the first stored, so that eviction by last use is told from eviction by age.
void store_four_entries_with_a_used_last(DiskCache& cache) {
  const char* names[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    cache.store(test_entry(names[i]));
    set_age(cache.entry_path(test_key(names[i])), std::chrono::seconds(1000 - 100 * i));
  }
  ASSERT_TRUE(cache.load(test_key("a")).has_value());
}

bool holds(DiskCache& cache, const char* name) { return fs::exists(cache.entry_path(test_key(name))); }

TEST(DiskCache, StoreThenLoadReturnsTheSameEntry) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  CacheEntry entry = test_entry("a");
  cache.store(entry);
  std::optional<CacheEntry> loaded = cache.load(entry.key);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, entry);
  EXPECT_TRUE(fs::exists(cache.entry_path(entry.key)));
  EXPECT_EQ(cache.entry_path(entry.key).filename().string(), entry.key + ".sjk");
  EXPECT_EQ(test::mode_of(cache.entry_path(entry.key)), 0600u);
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
}

TEST(DiskCache, LoadOfAMissingKeyIsNullopt) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  EXPECT_FALSE(cache.load(test_key("absent")).has_value());
}

TEST(DiskCache, KeysThatAreNotCacheKeysAreRefused) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  try {
    cache.load("../../outside");
    FAIL() << "a path was accepted as key";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(DiskCache, StoreReplacesAnExistingEntry) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  CacheEntry entry = test_entry("a");
  cache.store(entry);
  entry.cubin = "other";
  cache.store(entry);
  EXPECT_EQ(cache.load(entry.key)->cubin, "other");
  EXPECT_EQ(cache.list().size(), 1u);
}

// kOversized: a (sparse) file past the largest size an entry may have, which must be refused
// without reading it. kSymlink, kFifo, kFolder: no regular file under the entry's name (a link to
// a good entry elsewhere, as a copy with `cp -s` leaves; a FIFO, which must not make the load
// wait; an empty folder), which must be refused without following or waiting on it.
enum class Damage { kTruncated, kBitFlip, kWrongMagic, kEmpty, kOtherKeyInside, kOversized, kSymlink, kFifo, kFolder };

class DiskCacheCorruption : public ::testing::TestWithParam<Damage> {};

void damage(const fs::path& path, Damage kind) {
  switch (kind) {
    case Damage::kOversized:
      fs::resize_file(path, kMaxCacheEntryBytes + 1);
      return;
    case Damage::kSymlink: {
      // The good entry moves next to the cache folder; the link to it must outlive the repair.
      const fs::path elsewhere = path.parent_path().parent_path().parent_path() / path.filename();
      fs::rename(path, elsewhere);
      fs::create_symlink(elsewhere, path);
      return;
    }
    case Damage::kFifo:
      fs::remove(path);
      ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
      return;
    case Damage::kFolder:
      fs::remove(path);
      fs::create_directory(path);
      return;
    default:
      break;
  }
  std::string bytes = read_bytes(path);
  switch (kind) {
    case Damage::kTruncated:
      bytes.resize(bytes.size() / 2);
      break;
    case Damage::kBitFlip:
      bytes[bytes.size() - 10] ^= 0x04;
      break;
    case Damage::kWrongMagic:
      bytes[0] = 'X';
      break;
    case Damage::kEmpty:
      bytes.clear();
      break;
    case Damage::kOtherKeyInside:
      bytes = encode_entry(test_entry("someone-else"));
      break;
    default:
      break;
  }
  write_bytes(path, bytes);
}

TEST_P(DiskCacheCorruption, IsLoggedRemovedAndRebuiltOnce) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  const CacheEntry entry = test_entry("a");
  const fs::path path = cache.entry_path(entry.key);
  cache.store(entry);
  damage(path, GetParam());

  {
    LogCapture capture;
    EXPECT_FALSE(cache.load(entry.key).has_value());
    EXPECT_NE(capture.text().find(path.string()), std::string::npos) << capture.text();
    EXPECT_NE(capture.text().find("rebuilt"), std::string::npos) << capture.text();
  }
  EXPECT_FALSE(fs::exists(path));

  int made = 0;
  bool created = false;
  CacheEntry rebuilt = cache.get_or_create(
      entry.key,
      [&] {
        ++made;
        return entry;
      },
      &created);
  EXPECT_EQ(made, 1);
  EXPECT_TRUE(created);
  EXPECT_EQ(rebuilt, entry);
  EXPECT_EQ(cache.load(entry.key), entry);
  cache.get_or_create(
      entry.key,
      [&] {
        ++made;
        return entry;
      },
      &created);
  EXPECT_EQ(made, 1);
  EXPECT_FALSE(created);
  if (GetParam() == Damage::kSymlink) {
    EXPECT_TRUE(fs::exists(temp.path() / path.filename()));  // the link was not followed
  }
}

std::string damage_name(const ::testing::TestParamInfo<Damage>& info) {
  switch (info.param) {
    case Damage::kTruncated:
      return "Truncated";
    case Damage::kBitFlip:
      return "BitFlip";
    case Damage::kWrongMagic:
      return "WrongMagic";
    case Damage::kEmpty:
      return "Empty";
    case Damage::kOtherKeyInside:
      return "OtherKeyInside";
    case Damage::kOversized:
      return "Oversized";
    case Damage::kSymlink:
      return "Symlink";
    case Damage::kFifo:
      return "Fifo";
    case Damage::kFolder:
      return "Folder";
  }
  return "Unknown";
}

INSTANTIATE_TEST_SUITE_P(Damages, DiskCacheCorruption,
                         ::testing::Values(Damage::kTruncated, Damage::kBitFlip,
                                           Damage::kWrongMagic, Damage::kEmpty,
                                           Damage::kOtherKeyInside, Damage::kOversized, Damage::kSymlink,
                                           Damage::kFifo, Damage::kFolder),
                         damage_name);

TEST(DiskCache, ReadOnlyCacheLeavesACorruptEntryAndWarnsOnce) {
  TempDir temp;
  const CacheEntry entry = test_entry("a");
  fs::path path;
  {
    DiskCache writer(temp.path() / "cache", kNoCap, true);
    writer.store(entry);
    path = writer.entry_path(entry.key);
  }
  damage(path, Damage::kBitFlip);
  DiskCache reader(temp.path() / "cache", kNoCap, false);
  LogCapture capture;
  EXPECT_FALSE(reader.load(entry.key).has_value());
  std::string first = capture.text();
  EXPECT_FALSE(reader.load(entry.key).has_value());
  EXPECT_EQ(capture.text(), first) << "warned twice about one entry";
  EXPECT_NE(first.find(path.string()), std::string::npos) << first;
  EXPECT_TRUE(fs::exists(path));
}

TEST(DiskCache, ReadOnlyGetOrCreateLoadsOrSaysTheFolderIsReadOnly) {
  TempDir temp;
  const CacheEntry entry = test_entry("a");
  DiskCache(temp.path() / "cache", kNoCap, true).store(entry);
  DiskCache reader(temp.path() / "cache", kNoCap, false);
  int made = 0;
  auto make = [&] {
    ++made;
    return test_entry("b");
  };
  EXPECT_EQ(reader.get_or_create(entry.key, make), entry);
  try {
    reader.get_or_create(test_key("b"), make);
    FAIL() << "a read-only cache made an entry";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCacheError);
    EXPECT_NE(std::string(error.what()).find("read-only"), std::string::npos) << error.what();
  }
  EXPECT_EQ(made, 0);
  EXPECT_THROW(reader.store(test_entry("b")), Error);
  EXPECT_THROW(reader.gc(0), Error);
  EXPECT_THROW(reader.verify(true), Error);
}

TEST(DiskCache, GetOrCreateMakesOnceThenLoads) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  int made = 0;
  bool created = false;
  auto make = [&] {
    ++made;
    return test_entry("a");
  };
  EXPECT_EQ(cache.get_or_create(test_key("a"), make, &created), test_entry("a"));
  EXPECT_TRUE(created);
  EXPECT_EQ(cache.get_or_create(test_key("a"), make, &created), test_entry("a"));
  EXPECT_FALSE(created);
  EXPECT_EQ(made, 1);
  EXPECT_TRUE(fs::exists(cache_locks_dir(cache.dir()) / (test_key("a") + ".lock")));
}

TEST(DiskCache, FailedMakeStoresNothingAndReleasesTheLock) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true, std::chrono::milliseconds(0));
  const std::string key = test_key("a");
  EXPECT_THROW(cache.get_or_create(key, []() -> CacheEntry { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_FALSE(cache.load(key).has_value());
  // A zero lock timeout fails at once if the lock were still held.
  EXPECT_EQ(cache.get_or_create(key, [] { return test_entry("a"); }), test_entry("a"));
}

// A lock held past the timeout (a stopped process, a lock stuck on a network file system) costs
// only the lock: the entry is made without it, with a warning, instead of failing the build.
TEST(DiskCache, GetOrCreateMakesTheEntryWhenTheLockIsHeldPastTheTimeout) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true, std::chrono::milliseconds(50));
  const std::string key = test_key("a");
  FileLock held(cache_locks_dir(cache.dir()) / (key + ".lock"));
  LogCapture log;
  bool created = false;
  EXPECT_EQ(cache.get_or_create(key, [] { return test_entry("a"); }, &created), test_entry("a"));
  EXPECT_TRUE(created);
  EXPECT_EQ(cache.load(key), test_entry("a"));
  EXPECT_NE(log.text().find("without its lock"), std::string::npos) << log.text();
}

// A file system that cannot lock (here: a folder where the lock file should be) costs only the
// lock: the kernel is made, stored and found again, with one warning.
TEST(DiskCache, GetOrCreateMakesTheEntryWithoutALockWhereNoneCanBeTaken) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true, std::chrono::milliseconds(0));
  for (const char* name : {"a", "b"}) fs::create_directories(cache_locks_dir(cache.dir()) / (test_key(name) + ".lock"));
  LogCapture log;
  bool created = false;
  EXPECT_EQ(cache.get_or_create(test_key("a"), [] { return test_entry("a"); }, &created), test_entry("a"));
  EXPECT_TRUE(created);
  EXPECT_EQ(cache.get_or_create(test_key("b"), [] { return test_entry("b"); }, &created), test_entry("b"));
  EXPECT_EQ(cache.load(test_key("a")), test_entry("a"));
  EXPECT_EQ(cache.load(test_key("b")), test_entry("b"));
  const std::string text = log.text();
  const auto first = text.find("without their lock");
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find("without their lock", first + 1), std::string::npos) << "warned twice:\n" << text;
}

// A kernel that cannot be stored (a full disk) is still returned, once made; nothing is left
// behind.
TEST(DiskCache, GetOrCreateReturnsTheEntryWhenItCannotBeStored) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  const int code = exit_code_with_a_full_disk([&] {
    LogCapture log;
    bool created = false;
    const CacheEntry entry = cache.get_or_create(test_key("a"), [] { return test_entry("a"); }, &created);
    if (!(entry == test_entry("a")) || !created) return 12;
    return log.text().find("cannot keep a kernel") != std::string::npos ? 0 : 13;
  });
  EXPECT_EQ(code, 0) << "10: setrlimit failed, 11: get_or_create threw, 12: wrong entry, 13: no warning";
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("a"))));
}

// On a disk that stays full, get_or_create has made room as a store does, and still returns
// the kernel it made, with the warning that it is not kept.
TEST(DiskCache, GetOrCreateOnADiskThatStaysFullReturnsTheKernel) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  store_four_entries_with_a_used_last(cache);
  InjectedWriteFailures full_disk(1000, ENOSPC);
  LogCapture log;
  bool created = false;
  EXPECT_EQ(cache.get_or_create(test_key("e"), [] { return test_entry("e"); }, &created), test_entry("e"));
  EXPECT_TRUE(created);
  EXPECT_NE(log.text().find("cannot keep a kernel"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("even after evicting 2 least recently used entries"), std::string::npos) << log.text();
  EXPECT_FALSE(holds(cache, "e"));
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
  EXPECT_FALSE(holds(cache, "b"));
  EXPECT_FALSE(holds(cache, "c"));
  EXPECT_TRUE(holds(cache, "a"));
  EXPECT_TRUE(holds(cache, "d"));
}

TEST(DiskCache, MakeReturningAnotherKeyIsAnInternalError) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  try {
    cache.get_or_create(test_key("a"), [] { return test_entry("b"); });
    FAIL() << "an entry for another key was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInternal);
  }
  EXPECT_TRUE(cache.list().empty());
}

TEST(DiskCache, EvictsTheLeastRecentlyUsedEntry) {
  TempDir temp;
  const std::uint64_t entry_bytes = encode_entry(test_entry("a")).size();
  DiskCache cache(temp.path() / "cache", 2 * entry_bytes + entry_bytes / 2, true);
  cache.store(test_entry("a"));
  cache.store(test_entry("b"));
  // a was stored first but used last: b is the least recently used.
  set_age(cache.entry_path(test_key("a")), std::chrono::seconds(300));
  set_age(cache.entry_path(test_key("b")), std::chrono::seconds(200));
  ASSERT_TRUE(cache.load(test_key("a")).has_value());
  cache.store(test_entry("c"));

  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("a"))));
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("b"))));
  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("c"))));
  EXPECT_EQ(cache.total_bytes(), 2 * entry_bytes);
}

TEST(DiskCache, NeverEvictsTheEntryJustStored) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", 10, true);
  cache.store(test_entry("a"));
  cache.store(test_entry("b"));
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("a"))));
  EXPECT_EQ(cache.load(test_key("b")), test_entry("b"));
}

TEST(DiskCache, GcEvictsToTheCapAndRemovesStaleTempFiles) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  const std::uint64_t entry_bytes = encode_entry(test_entry("a")).size();
  const char* names[] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; ++i) {
    cache.store(test_entry(names[i]));
    set_age(cache.entry_path(test_key(names[i])), std::chrono::seconds(1000 - 100 * i));
  }
  const fs::path stale = cache_kernels_dir(cache.dir()) / ".tmp-1-00000000000000aa";
  const fs::path fresh = cache_kernels_dir(cache.dir()) / ".tmp-2-00000000000000bb";
  const fs::path stale_record = cache_tuning_dir(cache.dir()) / ".tmp-3-00000000000000cc";
  write_bytes(stale, "partial");
  write_bytes(fresh, "partial");
  write_bytes(stale_record, "partial");
  set_age(stale, std::chrono::hours(2));
  set_age(stale_record, std::chrono::hours(2));

  GcResult result = cache.gc(2 * entry_bytes);
  EXPECT_EQ(result.removed, 2u);
  EXPECT_EQ(result.removed_temp_files, 2u);
  EXPECT_FALSE(fs::exists(stale_record));
  EXPECT_EQ(result.bytes_before, 4 * entry_bytes);
  EXPECT_EQ(result.bytes_after, 2 * entry_bytes);
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("a"))));
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("b"))));
  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("c"))));
  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("d"))));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // may belong to a writer at work

  fs::remove(fresh);
  result = cache.gc(0);
  EXPECT_EQ(result.removed, 2u);
  EXPECT_EQ(result.bytes_after, 0u);
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
}

// Evicting an entry deletes its lock file; gc deletes the lock files of keys without an entry
// unless they are held; a store sweeps stale temporary files as gc does.
TEST(DiskCache, LockFilesGoWithTheirEntriesAndHeldOnesStay) {
  TempDir temp;
  const std::uint64_t entry_bytes = encode_entry(test_entry("a")).size();
  DiskCache cache(temp.path() / "cache", 2 * entry_bytes, true);
  const fs::path locks = cache_locks_dir(cache.dir());
  auto lock_of = [&](const char* name) { return locks / (test_key(name) + ".lock"); };
  cache.get_or_create(test_key("a"), [] { return test_entry("a"); });
  set_age(cache.entry_path(test_key("a")), std::chrono::seconds(1000));
  cache.get_or_create(test_key("b"), [] { return test_entry("b"); });
  EXPECT_TRUE(fs::exists(lock_of("a")));
  const fs::path stale = cache_kernels_dir(cache.dir()) / ".tmp-1-00000000000000aa";
  write_bytes(stale, "partial");
  set_age(stale, std::chrono::hours(2));
  cache.get_or_create(test_key("c"), [] { return test_entry("c"); });  // evicts "a", the oldest
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("a"))));
  EXPECT_FALSE(fs::exists(lock_of("a"))) << "the evicted entry's lock file";
  EXPECT_TRUE(fs::exists(lock_of("b")));
  EXPECT_FALSE(fs::exists(stale)) << "the store sweeps stale temporary files";

  // Orphans: one free, one held by a writer at work.
  { FileLock make(lock_of("d")); }
  FileLock held(lock_of("e"));
  const GcResult result = cache.gc(kNoCap);
  EXPECT_EQ(result.removed_lock_files, 1u);
  EXPECT_FALSE(fs::exists(lock_of("d")));
  EXPECT_TRUE(fs::exists(lock_of("e")));
  EXPECT_TRUE(fs::exists(lock_of("b"))) << "a key with an entry keeps its lock file";
  EXPECT_EQ(cache.load(test_key("b")), test_entry("b"));
}

TEST(DiskCache, ListShowsEntriesAndUnreadableOnesButNotTempFiles) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  cache.store(test_entry("a"));
  cache.store(test_entry("b"));
  damage(cache.entry_path(test_key("b")), Damage::kTruncated);
  write_bytes(cache_kernels_dir(cache.dir()) / ".tmp-1-00000000000000aa", "partial");

  std::vector<DiskEntryInfo> infos = cache.list();
  ASSERT_EQ(infos.size(), 2u);
  for (const DiskEntryInfo& info : infos) {
    EXPECT_EQ(info.size_bytes, fs::file_size(info.path));
    if (info.key == test_key("a")) {
      EXPECT_EQ(info.spec_text, test_entry("a").spec_text);
      EXPECT_EQ(info.arch, "sm_90a");
      EXPECT_EQ(info.path, cache.entry_path(info.key));
    } else {
      EXPECT_EQ(info.key, test_key("b"));
      EXPECT_EQ(info.spec_text.rfind("<unreadable: ", 0), 0u) << info.spec_text;
    }
  }
  // Listing changes nothing.
  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("b"))));
}

// A file far past an entry's largest size (a 1 TiB sparse file here) is reported as bad by both
// listings without being read.
TEST(DiskCache, ListAndVerifyReportAHugeFileWithoutReadingIt) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  cache.store(test_entry("a"));
  const fs::path huge = cache.entry_path(test_key("b"));
  write_bytes(huge, "");
  fs::resize_file(huge, std::uint64_t{1} << 40);

  std::vector<DiskEntryInfo> infos = cache.list();
  ASSERT_EQ(infos.size(), 2u);
  const DiskEntryInfo& listed = infos[0].key == test_key("b") ? infos[0] : infos[1];
  EXPECT_NE(listed.spec_text.find("larger than the"), std::string::npos) << listed.spec_text;
  const VerifyResult report = cache.verify(true);
  EXPECT_EQ(report.ok, 1u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, huge);
  EXPECT_FALSE(fs::exists(huge));
}

TEST(DiskCache, VerifyReportsAndOptionallyRemovesBadEntries) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  for (const char* name : {"a", "b", "c"}) cache.store(test_entry(name));
  damage(cache.entry_path(test_key("c")), Damage::kBitFlip);

  VerifyResult report = cache.verify(false);
  EXPECT_EQ(report.ok, 2u);
  ASSERT_EQ(report.bad.size(), 1u);
  EXPECT_EQ(report.bad[0].first, cache.entry_path(test_key("c")));
  EXPECT_NE(report.bad[0].second.find("checksum"), std::string::npos) << report.bad[0].second;
  EXPECT_TRUE(fs::exists(cache.entry_path(test_key("c"))));

  report = cache.verify(true);
  EXPECT_EQ(report.bad.size(), 1u);
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("c"))));
  report = cache.verify(false);
  EXPECT_EQ(report.ok, 2u);
  EXPECT_TRUE(report.bad.empty());
}

// What bears an entry's name but is no regular file is listed and reported as bad, and gc and
// verify --remove take it away, never following a link.
TEST(DiskCache, VerifyAndGcRemoveWhatIsNoFileUnderAnEntrysName) {
  for (bool by_gc : {false, true}) {
    TempDir temp;
    DiskCache cache(temp.path() / "cache", kNoCap, true);
    cache.store(test_entry("a"));
    cache.store(test_entry("b"));
    const fs::path link = cache.entry_path(test_key("b"));
    damage(link, Damage::kSymlink);
    const fs::path folder = cache.entry_path(test_key("c"));
    fs::create_directory(folder);

    ASSERT_EQ(cache.list().size(), 3u);
    if (by_gc) {
      EXPECT_EQ(cache.gc(kNoCap).removed_bad, 2u);  // bad entries, not evictions
    } else {
      const VerifyResult report = cache.verify(true);
      EXPECT_EQ(report.ok, 1u);
      ASSERT_EQ(report.bad.size(), 2u);
      const bool link_named = report.bad[0].second.find("a symbolic link") != std::string::npos ||
                              report.bad[1].second.find("a symbolic link") != std::string::npos;
      EXPECT_TRUE(link_named) << report.bad[0].second << " / " << report.bad[1].second;
    }
    EXPECT_EQ(fs::symlink_status(link).type(), fs::file_type::not_found);
    EXPECT_FALSE(fs::exists(folder));
    EXPECT_TRUE(fs::exists(temp.path() / link.filename()));  // the link's target stays
    EXPECT_TRUE(cache.load(test_key("a")).has_value());
  }
}

// A write error (a full disk) names the file and the reason and leaves no temporary file.
TEST(DiskCache, WriteErrorNamesTheFileAndLeavesNoTempFile) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  const int code = exit_code_with_a_full_disk([&] {
    try {
      cache.store(test_entry("a"));
      return 13;
    } catch (const Error& error) {
      const std::string message = error.what();
      const bool names_file = message.find(cache_kernels_dir(cache.dir()).string()) != std::string::npos;
      const bool says_why = message.find("too large") != std::string::npos;
      return error.code() == ErrorCode::kCacheError && names_file && says_why ? 0 : 12;
    }
  });
  EXPECT_EQ(code, 0) << "10: setrlimit failed, 12: bad error, 13: store succeeded";
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
  EXPECT_FALSE(fs::exists(cache.entry_path(test_key("a"))));
}

// A full disk or quota (ENOSPC, EDQUOT) makes the store evict the least recently used entries,
// twice the new entry's size (here two entries of its size), and write it again.
TEST(DiskCache, StoreOnAFullDiskEvictsTheLeastRecentlyUsedEntriesAndWritesAgain) {
  for (int error : {ENOSPC, EDQUOT}) {
    SCOPED_TRACE(std::strerror(error));
    TempDir temp;
    DiskCache cache(temp.path() / "cache", kNoCap, true);
    store_four_entries_with_a_used_last(cache);
    LogCapture log;
    {
      InjectedWriteFailures full_disk(1, error);
      cache.store(test_entry("e"));
    }
    EXPECT_EQ(cache.load(test_key("e")), test_entry("e"));
    EXPECT_FALSE(holds(cache, "b"));
    EXPECT_FALSE(holds(cache, "c"));
    EXPECT_EQ(cache.load(test_key("a")), test_entry("a"));
    EXPECT_EQ(cache.load(test_key("d")), test_entry("d"));
    EXPECT_EQ(count_temp_files(cache.dir()), 0u);
    const std::string text = log.text();
    EXPECT_NE(text.find(std::strerror(error)), std::string::npos) << text;
    EXPECT_NE(text.find("evicted 2 least recently used entries"), std::string::npos) << text;
  }
}

// A disk that stays full fails the store after one more write, naming the entry, the temporary
// file's folder and the reason; it leaves no temporary file, and evicts what that one write
// needed and no more.
TEST(DiskCache, StoreOnADiskThatStaysFullFailsAfterOneRetryAndEvictsNoMore) {
  TempDir temp;
  DiskCache cache(temp.path() / "cache", kNoCap, true);
  store_four_entries_with_a_used_last(cache);
  {
    InjectedWriteFailures full_disk(2, ENOSPC);  // the write and its retry
    try {
      cache.store(test_entry("e"));
      FAIL() << "a store on a full disk succeeded";
    } catch (const FileError& error) {
      EXPECT_EQ(error.code(), ErrorCode::kCacheError);
      EXPECT_EQ(error.system_error(), ENOSPC);
      const std::string message = error.what();
      EXPECT_NE(message.find(cache_kernels_dir(cache.dir()).string() + "/.tmp-"), std::string::npos) << message;
      EXPECT_NE(message.find(cache.entry_path(test_key("e")).string()), std::string::npos) << message;
      EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(count_temp_files(cache.dir()), 0u);
  EXPECT_FALSE(holds(cache, "e"));
  EXPECT_FALSE(holds(cache, "b"));
  EXPECT_FALSE(holds(cache, "c"));
  EXPECT_TRUE(holds(cache, "a"));
  EXPECT_TRUE(holds(cache, "d"));
  // Both injected failures were spent (one retry): the next store writes at once, evicting none.
  cache.store(test_entry("e"));
  EXPECT_EQ(cache.load(test_key("e")), test_entry("e"));
  EXPECT_TRUE(holds(cache, "a"));
  EXPECT_TRUE(holds(cache, "d"));
}

// Any other write error (a failing disk, a permission) is no lack of room: the store fails at
// once with its reason, and evicts nothing.
TEST(DiskCache, AWriteErrorOtherThanNoSpaceEvictsNothing) {
  for (int error : {EIO, EACCES}) {
    SCOPED_TRACE(std::strerror(error));
    TempDir temp;
    DiskCache cache(temp.path() / "cache", kNoCap, true);
    store_four_entries_with_a_used_last(cache);
    {
      InjectedWriteFailures failing_disk(1, error);
      try {
        cache.store(test_entry("e"));
        FAIL() << "a failed write was not reported";
      } catch (const FileError& failure) {
        EXPECT_EQ(failure.system_error(), error);
        EXPECT_FALSE(failure.out_of_space());
        const std::string message = failure.what();
        EXPECT_NE(message.find(std::strerror(error)), std::string::npos) << message;
        EXPECT_NE(message.find(cache_kernels_dir(cache.dir()).string()), std::string::npos) << message;
      }
    }
    for (const char* name : {"a", "b", "c", "d"}) EXPECT_TRUE(holds(cache, name)) << name;
    EXPECT_FALSE(holds(cache, "e"));
    EXPECT_EQ(count_temp_files(cache.dir()), 0u);
  }
}

}  // namespace
}  // namespace shardjit
