#include "runtime/cache/cache_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;
using test::mode_of;
using test::ScopedMode;
using testing::TempDir;

constexpr uid_t kOtherUid = 12345;

// The message of the Error(kCacheError) that prepare_cache_dir throws, or "" when it accepts.
std::string refusal(const fs::path& dir, bool need_write) {
  try {
    prepare_cache_dir(dir, need_write);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCacheError);
    return error.what();
  }
  return "";
}

TEST(CacheDir, CreatesFolderParentsAndSubfoldersWithMode0700) {
  TempDir temp;
  const fs::path dir = temp.path() / "a/b/cache";
  mode_t old_umask = ::umask(022);
  prepare_cache_dir(dir, true);
  ::umask(old_umask);
  EXPECT_EQ(mode_of(temp.path() / "a"), 0700u);
  EXPECT_EQ(mode_of(temp.path() / "a/b"), 0700u);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(cache_kernels_dir(dir)), 0700u);
  EXPECT_EQ(mode_of(cache_locks_dir(dir)), 0700u);
}

TEST(CacheDir, ModeIs0700EvenUnderARestrictiveUmask) {
  TempDir temp;
  mode_t old_umask = ::umask(0277);
  prepare_cache_dir(temp.path() / "cache", true);
  ::umask(old_umask);
  EXPECT_EQ(mode_of(temp.path() / "cache"), 0700u);
}

TEST(CacheDir, AcceptsAnExistingPrivateFolderTwice) {
  TempDir temp;
  prepare_cache_dir(temp.path(), true);
  prepare_cache_dir(temp.path(), true);
  EXPECT_TRUE(fs::is_directory(cache_kernels_dir(temp.path())));
}

TEST(CacheDir, RefusesGroupWritableFolder) {
  TempDir temp;
  ASSERT_EQ(::chmod(temp.path().c_str(), 0770), 0);
  std::string message = refusal(temp.path(), true);
  EXPECT_NE(message.find(temp.path().string()), std::string::npos) << message;
  EXPECT_NE(message.find("group"), std::string::npos) << message;
  EXPECT_NE(message.find("chmod 700"), std::string::npos) << message;
  // Refused in cache-only mode too: the danger is someone else writing it.
  EXPECT_NE(refusal(temp.path(), false), "");
}

TEST(CacheDir, RefusesWorldWritableFolder) {
  TempDir temp;
  ASSERT_EQ(::chmod(temp.path().c_str(), 0707), 0);
  std::string message = refusal(temp.path(), true);
  EXPECT_NE(message.find(temp.path().string()), std::string::npos) << message;
  EXPECT_NE(message.find("others"), std::string::npos) << message;
  EXPECT_NE(message.find("0707"), std::string::npos) << message;
}

TEST(CacheDir, RefusesWritableSubfolder) {
  TempDir temp;
  prepare_cache_dir(temp.path(), true);
  ASSERT_EQ(::chmod(cache_kernels_dir(temp.path()).c_str(), 0777), 0);
  std::string message = refusal(temp.path(), true);
  EXPECT_NE(message.find(cache_kernels_dir(temp.path()).string()), std::string::npos) << message;
  EXPECT_NE(refusal(temp.path(), false), "");
}

TEST(CacheDir, RefusesAFile) {
  TempDir temp;
  const fs::path file = temp.path() / "not-a-folder";
  std::ofstream(file) << "x";
  std::string message = refusal(file, true);
  EXPECT_NE(message.find("not a folder"), std::string::npos) << message;
  EXPECT_NE(message.find(file.string()), std::string::npos) << message;
}

TEST(CacheDir, RefusesAnEmptyPath) { EXPECT_NE(refusal(fs::path(), true), ""); }

TEST(CacheDir, RefusesFolderOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a folder to another user";
  TempDir temp;
  const fs::path dir = temp.path() / "cache";
  prepare_cache_dir(dir, true);
  ASSERT_EQ(::chown(dir.c_str(), kOtherUid, kOtherUid), 0);
  std::string message = refusal(dir, true);
  EXPECT_NE(message.find(dir.string()), std::string::npos) << message;
  EXPECT_NE(message.find("12345"), std::string::npos) << message;
  EXPECT_NE(refusal(dir, false), "");
}

TEST(CacheDir, FollowsOwnSymlinkToAGoodFolder) {
  TempDir temp;
  prepare_cache_dir(temp.path() / "real", true);
  fs::create_directory_symlink(temp.path() / "real", temp.path() / "link");
  EXPECT_EQ(refusal(temp.path() / "link", true), "");
  EXPECT_EQ(refusal(temp.path() / "link", false), "");
}

TEST(CacheDir, RefusesSymlinkToAWritableFolder) {
  TempDir temp;
  fs::create_directory(temp.path() / "real");
  ASSERT_EQ(::chmod((temp.path() / "real").c_str(), 0777), 0);
  fs::create_directory_symlink(temp.path() / "real", temp.path() / "link");
  EXPECT_NE(refusal(temp.path() / "link", true), "");
}

TEST(CacheDir, RefusesSymlinkOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a symlink to another user";
  TempDir temp;
  prepare_cache_dir(temp.path() / "real", true);
  fs::create_directory_symlink(temp.path() / "real", temp.path() / "link");
  ASSERT_EQ(::lchown((temp.path() / "link").c_str(), kOtherUid, kOtherUid), 0);
  std::string message = refusal(temp.path() / "link", true);
  EXPECT_NE(message.find("symlink"), std::string::npos) << message;
  EXPECT_NE(message.find("12345"), std::string::npos) << message;
}

TEST(CacheDir, ReadOnlyFolderIsFineWithoutWrite) {
  TempDir temp;
  const fs::path dir = temp.path() / "cache";
  prepare_cache_dir(dir, true);
  ScopedMode read_only_kernels(cache_kernels_dir(dir), 0500);
  ScopedMode read_only(dir, 0500);
  ASSERT_TRUE(read_only_kernels.ok() && read_only.ok());
  EXPECT_EQ(refusal(dir, false), "");
  ScopedMode readable_by_all(dir, 0555);  // writable by none: still safe
  ASSERT_TRUE(readable_by_all.ok());
  EXPECT_EQ(refusal(dir, false), "");
}

TEST(CacheDir, ReadOnlyFolderIsRefusedForWriting) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root may write any folder, so a read-only mode stops nothing";
  TempDir temp;
  const fs::path dir = temp.path() / "cache";
  prepare_cache_dir(dir, true);
  ScopedMode read_only(dir, 0500);
  ASSERT_TRUE(read_only.ok());
  std::string message = refusal(dir, true);
  EXPECT_NE(message.find("not writable"), std::string::npos) << message;
}

TEST(CacheDir, MissingFolderIsAnEmptyReadOnlyCacheAndIsNotCreated) {
  TempDir temp;
  EXPECT_EQ(refusal(temp.path() / "absent", false), "");
  EXPECT_FALSE(fs::exists(temp.path() / "absent"));
}

}  // namespace
}  // namespace shardjit
