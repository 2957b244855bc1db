// The dump folder (SHARDJIT_DUMP_DIR) under attack: a folder others can write, a link planted
// under a dump file's name, a path that is a file. Dumping must never follow a link or write into
// an untrusted folder, must warn once, and must never fail the compile.
#include "runtime/compile/dump_folder.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"
#include "tests/cache/other_user.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t found = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
  return found;
}

TEST(DumpFolder, AWorldWritableFolderIsRefusedWithOneWarning) {
  testing::TempDir temp;
  const fs::path folder = temp.path() / "dumpx";
  fs::create_directory(folder);
  ASSERT_EQ(::chmod(folder.c_str(), 01777), 0);
  test::LogCapture log;
  EXPECT_FALSE(dump_folder_usable(folder.string()));
  EXPECT_FALSE(dump_folder_usable(folder.string()));
  EXPECT_EQ(count(log.text(), "not dumping"), 1u) << log.text();
  EXPECT_NE(log.text().find("writable by others"), std::string::npos) << log.text();
}

TEST(DumpFolder, APlantedLinkIsReplacedNeverFollowed) {
  testing::TempDir temp;
  const fs::path folder = temp.path() / "dump";
  const fs::path victim = temp.path() / "victim";
  std::ofstream(victim) << "secret";
  ASSERT_TRUE(dump_folder_usable(folder.string()));
  const fs::path planted = folder / "kernel.sm_80.cu";
  fs::create_symlink(victim, planted);
  write_dump_file(folder.string(), planted, "kernel source");
  EXPECT_EQ(read_text(victim), "secret");
  EXPECT_FALSE(fs::is_symlink(planted));
  EXPECT_EQ(read_text(planted), "kernel source");
  EXPECT_EQ(test::mode_of(planted), 0600u);
}

TEST(DumpFolder, AFileInsteadOfAFolderIsOneWarning) {
  testing::TempDir temp;
  const fs::path file = temp.path() / "afile";
  std::ofstream(file) << "x";
  test::LogCapture log;
  EXPECT_FALSE(dump_folder_usable(file.string()));
  EXPECT_FALSE(dump_folder_usable(file.string()));
  EXPECT_EQ(count(log.text(), "not dumping"), 1u) << log.text();
  EXPECT_NE(log.text().find("not a folder"), std::string::npos) << log.text();
}

// Root may write any folder, so as root the user who cannot write it is another one (nobody).
TEST(DumpFolder, AFolderThatCannotBeWrittenIsOneWarning) {
  testing::TempDir temp;
  const fs::path folder = temp.path() / "closed";
  fs::create_directory(folder);
  const auto check = [folder] {
    test::LogCapture log;
    if (dump_folder_usable(folder.string()) || dump_folder_usable(folder.string())) return 2;
    if (count(log.text(), "not dumping") != 1) return 3;
    return log.text().find("not writable") != std::string::npos ? 0 : 4;
  };
  if (::geteuid() != 0) {
    test::ScopedMode closed(folder, 0500);
    EXPECT_EQ(check(), 0) << "2: accepted; 3: not warned once; 4: the warning does not say why";
    return;
  }
  ASSERT_EQ(::chmod(temp.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(folder.c_str(), 0755), 0);
  EXPECT_EQ(test::run_as_other_user(check), 0) << "2: accepted; 3: not warned once; 4: the warning does not say why";
}

TEST(DumpFolder, AMissingFolderIsCreatedPrivate) {
  testing::TempDir temp;
  const fs::path folder = temp.path() / "a" / "dump";
  EXPECT_TRUE(dump_folder_usable(folder.string()));
  EXPECT_EQ(test::mode_of(folder), 0700u);
}

}  // namespace
}  // namespace shardjit
