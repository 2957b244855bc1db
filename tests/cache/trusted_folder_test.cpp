// The rule shared by the cache, template and dump folders, where the cache folder's own tests
// (cache_dir_test.cpp) do not reach: NUL bytes in paths, files, labels and error codes.
#include "runtime/cache/trusted_folder.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/cache/cache_dir.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

TEST(TrustedFolder, APathWithANulByteIsRefusedNotCut) {
  testing::TempDir temp;
  const std::string path = (temp.path() / "nul").string() + std::string(1, '\0') + "suffix";
  try {
    prepare_cache_dir(path, true);
    ADD_FAILURE() << "a path with a NUL byte was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("NUL"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(temp.path() / "nul")) << "the path was used cut at the NUL byte";
  EXPECT_NO_THROW(check_path_text("/tmp/plain", "a path"));
}

TEST(TrustedFolder, RefusalsCarryTheLabelAndTheCode) {
  testing::TempDir temp;
  ASSERT_EQ(::chmod(temp.path().c_str(), 0777), 0);
  try {
    prepare_trusted_folder(temp.path(), false, "template folder (SHARDJIT_TEMPLATE_DIR)", ErrorCode::kInvalidArgument);
    ADD_FAILURE() << "a world-writable folder was accepted";
  } catch (const FolderRefused& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("template folder (SHARDJIT_TEMPLATE_DIR) '", 0), 0u) << message;
    EXPECT_NE(message.find("chmod 700"), std::string::npos) << message;
  }
  ::chmod(temp.path().c_str(), 0700);
}

TEST(TrustedFolder, AFileWritableByItsGroupIsRefused) {
  testing::TempDir temp;
  const fs::path file = temp.path() / "x.cuh";
  std::ofstream(file) << "//";
  ASSERT_EQ(::chmod(file.c_str(), 0664), 0);
  struct stat info {};
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  try {
    check_owner_and_mode(file, info, "template file", ErrorCode::kInvalidArgument);
    ADD_FAILURE() << "a group-writable file was accepted";
  } catch (const FolderRefused& error) {
    EXPECT_NE(std::string(error.what()).find("chmod go-w"), std::string::npos) << error.what();
  }
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  ASSERT_EQ(::stat(file.c_str(), &info), 0);
  EXPECT_NO_THROW(check_owner_and_mode(file, info, "template file", ErrorCode::kInvalidArgument));
}

TEST(TrustedFolder, AMissingFolderIsCreatedOnlyWhenWritingIsAskedFor) {
  testing::TempDir temp;
  EXPECT_FALSE(prepare_trusted_folder(temp.path() / "a", false, "dump folder", ErrorCode::kInvalidArgument));
  EXPECT_FALSE(fs::exists(temp.path() / "a"));
  EXPECT_TRUE(prepare_trusted_folder(temp.path() / "a", true, "dump folder", ErrorCode::kInvalidArgument));
  EXPECT_TRUE(fs::is_directory(temp.path() / "a"));
}

}  // namespace
}  // namespace shardjit
