// Bad input to `shardjit` that once hung, ate memory or was silently misread: a device or a FIFO
// as the config, a huge config, a key given twice, empty list items, a refused cache folder.
// Each must be a clear usage error (exit 2) that touches nothing, within seconds.
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kLimit{30};

class CliHostileInput : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directory(scratch_); }
  CliResult prewarm_config(const fs::path& config) {
    return CliProcess({"--cache-dir", cache_.string(), "prewarm", config.string(), "--arch", "sm_80"}, scratch_)
        .wait_or_kill(kLimit);
  }
  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
};

TEST_F(CliHostileInput, ADeviceAsTheConfigIsRefusedUnread) {
  const CliResult result = prewarm_config("/dev/zero");
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("not a regular file"), std::string::npos) << result.err;
  EXPECT_TRUE(cache_entries(cache_).empty());
}

TEST_F(CliHostileInput, AFifoAsTheConfigIsRefusedWithoutWaiting) {
  const fs::path fifo = temp_.path() / "config.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const CliResult result = prewarm_config(fifo);
  EXPECT_EQ(result.exit_code, 2) << "137: it waited for a writer\n" << result.err;
  EXPECT_NE(result.err.find("not a regular file"), std::string::npos) << result.err;
}

TEST_F(CliHostileInput, AConfigOverSixteenMiBIsRefusedBeforeReading) {
  const fs::path huge = temp_.path() / "config.json";
  std::ofstream(huge) << "{";
  fs::resize_file(huge, (std::uintmax_t{16} << 20) + 1);  // sparse: costs no disk
  const CliResult result = prewarm_config(huge);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("larger than 16 MiB"), std::string::npos) << result.err;
}

TEST_F(CliHostileInput, AKeyGivenTwiceIsRefused) {
  const fs::path config = temp_.path() / "config.json";
  std::ofstream(config) << R"({"hidden_size": 64, "vocab_size": 300, "hidden_size": 128})";
  const CliResult result = prewarm_config(config);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("\"hidden_size\" appears twice"), std::string::npos) << result.err;
  // Keys of different objects may repeat.
  std::ofstream(config, std::ios::trunc)
      << R"({"hidden_size": 64, "vocab_size": 300, "a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]})";
  // (An unknown arch stops the run once the config has been read, before anything is compiled.)
  const CliResult nested =
      CliProcess({"--cache-dir", cache_.string(), "prewarm", config.string(), "--arch", "sm_10"}, scratch_)
          .wait_or_kill(kLimit);
  EXPECT_EQ(nested.err.find("appears twice"), std::string::npos) << nested.err;
  EXPECT_NE(nested.err.find("sm_10"), std::string::npos) << nested.err;
}

TEST_F(CliHostileInput, EmptyListItemsAreRefused) {
  const std::vector<std::vector<std::string>> cases = {
      {"--tp", "1,,2"}, {"--tp", "1,"}, {"--arch", ",sm_80"}, {"--dtype", "bf16,,fp16"}, {"--targets", ""}};
  for (const auto& option : cases) {
    std::vector<std::string> args = {"--cache-dir", cache_.string(), "prewarm", "--hidden", "64", "--vocab", "300"};
    args.insert(args.end(), option.begin(), option.end());
    if (option[0] != "--arch") args.insert(args.end(), {"--arch", "sm_80"});
    const CliResult result = CliProcess(args, scratch_).wait_or_kill(kLimit);
    EXPECT_EQ(result.exit_code, 2) << option[0] << " " << option[1] << ": " << result.err;
    EXPECT_NE(result.err.find(option[0] + " '" + option[1] + "'"), std::string::npos) << result.err;
    EXPECT_TRUE(cache_entries(cache_).empty());
  }
}

TEST_F(CliHostileInput, ARefusedCacheFolderIsAUsageError) {
  fs::create_directory(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"ls"}, {"verify"}, {"gc"}, {"tuning"},
        {"prewarm", "--hidden", "64", "--vocab", "300", "--arch", "sm_80"}}) {
    std::vector<std::string> args = {"--cache-dir", cache_.string()};
    args.insert(args.end(), command.begin(), command.end());
    const CliResult result = CliProcess(args, scratch_).wait_or_kill(kLimit);
    EXPECT_EQ(result.exit_code, 2) << command[0] << ": " << result.err;
    EXPECT_NE(result.err.find("writable by others"), std::string::npos) << command[0] << ": " << result.err;
  }
  EXPECT_TRUE(cache_entries(cache_).empty());
}

TEST_F(CliHostileInput, BoolVariablesSayWhichWordsTheyTake) {
  const CliResult result =
      CliProcess({"--cache-dir", cache_.string(), "ls"}, scratch_, {"SHARDJIT_JIT=maybe"}).wait_or_kill(kLimit);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("false/true, off/on, no/yes"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace shardjit::testing
