// A template folder (SHARDJIT_TEMPLATE_DIR) is source that becomes code on the GPU: one that
// others can write, or that another user owns, is refused like such a cache folder.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "runtime/compile/template_sources.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kOtherUid = 12345;

// The message of the Error that from_folder throws, or "" when it accepts the folder.
std::string refusal(const fs::path& folder) {
  try {
    TemplateSources::from_folder(folder);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    return error.what();
  }
  return "";
}

class TemplateFolderTrust : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(folder_);
    ::chmod(folder_.c_str(), 0700);
    std::ofstream(folder_ / "main.cuh") << "int main_value = 1;\n";
    ::chmod((folder_ / "main.cuh").c_str(), 0644);
  }
  testing::TempDir temp_;
  fs::path folder_ = temp_.path() / "templates";
};

TEST_F(TemplateFolderTrust, APrivateFolderIsAccepted) { EXPECT_EQ(refusal(folder_), ""); }

TEST_F(TemplateFolderTrust, AWorldWritableFolderIsRefused) {
  ASSERT_EQ(::chmod(folder_.c_str(), 0777), 0);
  const std::string message = refusal(folder_);
  EXPECT_NE(message.find("SHARDJIT_TEMPLATE_DIR"), std::string::npos) << message;
  EXPECT_NE(message.find("writable by others"), std::string::npos) << message;
  EXPECT_NE(message.find(folder_.string()), std::string::npos) << message;
}

TEST_F(TemplateFolderTrust, AGroupWritableSubfolderOrTemplateIsRefused) {
  fs::create_directory(folder_ / "sub");
  ASSERT_EQ(::chmod((folder_ / "sub").c_str(), 0770), 0);
  EXPECT_NE(refusal(folder_).find("writable by its group"), std::string::npos);
  ASSERT_EQ(::chmod((folder_ / "sub").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((folder_ / "main.cuh").c_str(), 0666), 0);
  const std::string message = refusal(folder_);
  EXPECT_NE(message.find("template file"), std::string::npos) << message;
  EXPECT_NE(message.find("main.cuh"), std::string::npos) << message;
}

TEST_F(TemplateFolderTrust, AnotherUsersFolderIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the folder to another user (chown)";
  ASSERT_EQ(::chown(folder_.c_str(), kOtherUid, kOtherUid), 0);
  const std::string message = refusal(folder_);
  EXPECT_NE(message.find("owned by uid " + std::to_string(kOtherUid)), std::string::npos) << message;
}

TEST_F(TemplateFolderTrust, AnotherUsersTemplateIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file to another user (chown)";
  ASSERT_EQ(::chown((folder_ / "main.cuh").c_str(), kOtherUid, kOtherUid), 0);
  EXPECT_NE(refusal(folder_).find("owned by uid"), std::string::npos);
}

TEST_F(TemplateFolderTrust, AMissingFolderIsNamed) {
  const std::string message = refusal(temp_.path() / "absent");
  EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardjit
