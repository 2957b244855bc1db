// `shardjit ls`, `verify` and `gc` on a cache filled by a real prewarm.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/cli/tiny_model.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

std::size_t count_lines_with(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) count += line.find(needle) != std::string::npos;
  return count;
}

void flip_byte(const fs::path& path, std::streamoff offset) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekg(offset);
  char byte = 0;
  file.get(byte);
  file.seekp(offset);
  file.put(static_cast<char>(byte ^ 0x5a));
}

class CliCacheCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(scratch_);
    CliResult prewarm = run_cli(tiny_prewarm_args(cache_), scratch_);
    ASSERT_EQ(prewarm.exit_code, 0) << prewarm.out << prewarm.err;
    ASSERT_EQ(cache_entries(cache_).size(), n_);
  }

  CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--cache-dir", cache_.string()});
    return run_cli(args, scratch_);
  }

  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
  std::size_t n_ = tiny_kernel_count();
};

TEST_F(CliCacheCommands, LsPrintsOneRowPerKernel) {
  CliResult result = cli({"ls"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(count_lines_with(result.out, std::string(" ") + kTinyArch + " "), n_) << result.out;
  EXPECT_EQ(count_lines_with(result.out, "linear_logp_fwd<T=bf16,"), 1u) << result.out;
  EXPECT_NE(result.out.find("LAST USE"), std::string::npos);
  EXPECT_NE(result.out.find(std::to_string(n_) + " kernels"), std::string::npos) << result.out;
}

TEST_F(CliCacheCommands, LsJsonIsAnArrayOfEntries) {
  CliResult result = cli({"ls", "--json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  nlohmann::json entries = nlohmann::json::parse(result.out);
  ASSERT_TRUE(entries.is_array());
  ASSERT_EQ(entries.size(), n_);
  for (const auto& entry : entries) {
    EXPECT_EQ(entry.at("arch"), kTinyArch);
    EXPECT_EQ(entry.at("key").get<std::string>().size(), 64u);
    EXPECT_GT(entry.at("size_bytes").get<std::uint64_t>(), 0u);
    EXPECT_FALSE(entry.at("last_use").get<std::string>().empty());
    EXPECT_TRUE(fs::exists(entry.at("path").get<std::string>()));
  }
}

TEST_F(CliCacheCommands, VerifyIsCleanAfterAPrewarm) {
  CliResult result = cli({"verify"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find(std::to_string(n_) + " ok, 0 bad"), std::string::npos) << result.out;
}

TEST_F(CliCacheCommands, VerifyNamesACorruptEntryAndRemoveLetsPrewarmRebuildIt) {
  const fs::path victim = cache_entries(cache_).front();
  flip_byte(victim, static_cast<std::streamoff>(fs::file_size(victim) / 2));

  CliResult found = cli({"verify"});
  EXPECT_EQ(found.exit_code, 1) << found.out << found.err;
  EXPECT_NE(found.out.find(victim.string()), std::string::npos) << found.out;
  EXPECT_NE(found.out.find(std::to_string(n_ - 1) + " ok, 1 bad"), std::string::npos) << found.out;
  EXPECT_TRUE(fs::exists(victim)) << "verify without --remove must not change the cache";

  CliResult removed = cli({"verify", "--remove"});
  EXPECT_EQ(removed.exit_code, 1) << removed.out;
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_EQ(cli({"verify"}).exit_code, 0);

  CliResult rebuilt = run_cli(tiny_prewarm_args(cache_), scratch_);
  ASSERT_EQ(rebuilt.exit_code, 0) << rebuilt.err;
  EXPECT_NE(rebuilt.out.find(prewarm_summary(n_, 1, n_ - 1, 0)), std::string::npos) << rebuilt.out;
}

TEST_F(CliCacheCommands, GcToOneByteRemovesEveryKernel) {
  CliResult result = cli({"gc", "--max-size", "1"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("removed " + std::to_string(n_) + " kernels"), std::string::npos) << result.out;
  EXPECT_TRUE(cache_entries(cache_).empty());
  CliResult listed = cli({"ls"});
  EXPECT_NE(listed.out.find("no kernels"), std::string::npos) << listed.out;
}

TEST_F(CliCacheCommands, GcUnderTheLimitKeepsEverything) {
  CliResult result = cli({"gc", "--max-size", "2G"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("removed 0 kernels"), std::string::npos) << result.out;
  EXPECT_EQ(cache_entries(cache_).size(), n_);
}

TEST_F(CliCacheCommands, GcRejectsABadSizeAndRemovesNothing) {
  CliResult result = cli({"gc", "--max-size", "lots"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--max-size 'lots'"), std::string::npos) << result.err;
  EXPECT_EQ(cache_entries(cache_).size(), n_);
}

TEST(CliCacheCommandsOnNoCache, ListAndVerifyDoNotCreateTheFolder) {
  TempDir temp;
  const fs::path missing = temp.path() / "never-made";
  CliResult listed = run_cli({"--cache-dir", missing.string(), "ls"}, temp.path());
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  CliResult verified = run_cli({"--cache-dir", missing.string(), "verify"}, temp.path());
  EXPECT_EQ(verified.exit_code, 0) << verified.err;
  CliResult collected = run_cli({"--cache-dir", missing.string(), "gc", "--max-size", "1"}, temp.path());
  EXPECT_EQ(collected.exit_code, 0) << collected.err;
  EXPECT_FALSE(fs::exists(missing));
}

}  // namespace
}  // namespace shardjit::testing
