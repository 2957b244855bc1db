// What bears an entry's name but is no good entry (a folder, a truncated or garbage file, one
// that cannot be removed), and why a stored entry is gone: verify and gc must remove what they
// can and say what they cannot; entry_problem must name the real cause of a missing kernel.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/disk_cache.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;
using test::test_entry;
using test::test_key;

constexpr std::uint64_t kNoCap = UINT64_MAX;

class BadEntries : public ::testing::Test {
 protected:
  testing::TempDir temp_;
  DiskCache cache_{temp_.path() / "cache", kNoCap, true};
  fs::path path_of(const std::string& name) { return cache_.entry_path(test_key(name)); }
};

// Makes a file immutable for a scope (chattr +i), where the file system and the privileges
// allow it; ok() tells.
class Immutable {
 public:
  explicit Immutable(fs::path path) : path_(std::move(path)) {
    ok_ = std::system(("chattr +i '" + path_.string() + "' 2>/dev/null").c_str()) == 0;
  }
  ~Immutable() {
    if (ok_) std::system(("chattr -i '" + path_.string() + "' 2>/dev/null").c_str());
  }
  bool ok() const { return ok_; }

 private:
  fs::path path_;
  bool ok_ = false;
};

TEST_F(BadEntries, VerifyRemoveReportsAFolderItCannotRemove) {
  cache_.store(test_entry("a"));
  fs::create_directories(path_of("b") / "sub");
  const VerifyResult result = cache_.verify(true);
  EXPECT_EQ(result.ok, 1u);
  ASSERT_EQ(result.bad.size(), 1u);
  ASSERT_EQ(result.not_removed.size(), 1u);
  EXPECT_EQ(result.not_removed[0].first, path_of("b"));
  EXPECT_NE(result.not_removed[0].second.find("not empty"), std::string::npos) << result.not_removed[0].second;
  EXPECT_TRUE(fs::exists(path_of("b")));
}

TEST_F(BadEntries, VerifyRemoveReportsAnImmutableFileItCannotRemove) {
  cache_.store(test_entry("a"));
  fs::resize_file(path_of("a"), 200);
  Immutable pinned(path_of("a"));
  if (!pinned.ok()) GTEST_SKIP() << "chattr +i is not available here (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)";
  const VerifyResult result = cache_.verify(true);
  ASSERT_EQ(result.bad.size(), 1u);
  ASSERT_EQ(result.not_removed.size(), 1u);
  EXPECT_NE(result.not_removed[0].second.find("not permitted"), std::string::npos) << result.not_removed[0].second;
}

TEST_F(BadEntries, GcRemovesTruncatedAndGarbageEntries) {
  cache_.store(test_entry("good"));
  cache_.store(test_entry("cut"));
  fs::resize_file(path_of("cut"), 100000);  // longer than it should be: zeros appended
  const fs::path garbage = path_of("good").parent_path() / "notakey.sjk";
  std::ofstream(garbage) << "not an entry";
  const GcResult result = cache_.gc(kNoCap);
  EXPECT_EQ(result.removed_bad, 2u);
  EXPECT_TRUE(result.not_removed.empty());
  EXPECT_FALSE(fs::exists(path_of("cut")));
  EXPECT_FALSE(fs::exists(garbage));
  EXPECT_TRUE(cache_.load(test_key("good")).has_value());
}

TEST_F(BadEntries, GcReportsABadEntryItCannotRemove) {
  fs::create_directories(path_of("b") / "sub");
  const GcResult result = cache_.gc(kNoCap);
  ASSERT_EQ(result.not_removed.size(), 1u);
  EXPECT_EQ(result.not_removed[0].first, path_of("b"));
}

TEST_F(BadEntries, AGoodEntryHasNoProblem) {
  cache_.store(test_entry("a"));
  EXPECT_FALSE(cache_.entry_problem(test_key("a")).has_value());
}

TEST_F(BadEntries, AFolderAtTheEntryPathIsAProblemNamingTheFailedStore) {
  fs::create_directories(path_of("a") / "sub");
  const CacheEntry entry = cache_.get_or_create(test_key("a"), [] { return test_entry("a"); });
  EXPECT_EQ(entry, test_entry("a"));  // served from memory all the same
  const std::optional<std::string> problem = cache_.entry_problem(test_key("a"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("does not verify"), std::string::npos) << *problem;
  EXPECT_NE(problem->find("could not be stored"), std::string::npos) << *problem;
}

TEST_F(BadEntries, AFullDiskIsNamedNotTheSizeCap) {
  fail_next_file_writes_for_testing(2, ENOSPC);  // the write and its retry after making room
  cache_.get_or_create(test_key("a"), [] { return test_entry("a"); });
  fail_next_file_writes_for_testing(0, 0);
  const std::optional<std::string> problem = cache_.entry_problem(test_key("a"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("No space left on device"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find("size cap"), std::string::npos) << *problem;
}

TEST_F(BadEntries, AnEntryRemovedByAnotherProcessIsSaidSo) {
  cache_.get_or_create(test_key("a"), [] { return test_entry("a"); });
  DiskCache other(temp_.path() / "cache", kNoCap, true);  // another process's view of the folder
  other.gc(0);
  const std::optional<std::string> problem = cache_.entry_problem(test_key("a"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("another process"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find("raise the cap"), std::string::npos) << *problem;
}

TEST_F(BadEntries, AnEntryEvictedByThisCachesCapNamesTheCap) {
  DiskCache capped(temp_.path() / "cache", 1, true);
  capped.get_or_create(test_key("a"), [] { return test_entry("a"); });
  capped.get_or_create(test_key("b"), [] { return test_entry("b"); });  // evicts a, keeps b
  const std::optional<std::string> problem = capped.entry_problem(test_key("a"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("size cap of 1 bytes"), std::string::npos) << *problem;
  EXPECT_FALSE(capped.entry_problem(test_key("b")).has_value());
}

TEST_F(BadEntries, AReadOnlyCacheSaysKernelsAreInMemoryOnly) {
  DiskCache read_only(temp_.path() / "cache", kNoCap, false);
  const std::optional<std::string> problem = read_only.entry_problem(test_key("a"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("not writable"), std::string::npos) << *problem;
  EXPECT_EQ(problem->find("size cap"), std::string::npos) << *problem;
}

}  // namespace
}  // namespace shardjit
