// `shardjit tuning` as an operator runs it: lists the records a `prewarm --tune` left in the
// cache (text and JSON), names files that are not records, and --clear removes them all.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/tuning_store.hpp"
#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

class CliTuning : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(scratch_);
    prepare_cache_dir(cache_, true);
    record_.key = "linear_logp_fwd tile; device=NVIDIA H200; H=4096; rows=4096";
    record_.device = "NVIDIA H200";
    record_.choice = "128x256x64x4-wgmma";
    record_.times_ms = {{"128x256x64x4-wgmma", 6.5}, {"128x256x64x3-mma", 11.75}};
    save_tuning_record(cache_, record_);
  }
  CliResult tuning(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--cache-dir", cache_.string(), "tuning"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli(args, scratch_);
  }
  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
  TuningRecord record_;
};

TEST_F(CliTuning, ListsEachRecordWithItsTimes) {
  std::ofstream(cache_tuning_dir(cache_) / "stray.txt") << "not a record\n";
  CliResult result = tuning();
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("128x256x64x4-wgmma on NVIDIA H200"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find(record_.key), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("11.7500 ms"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("not a record (never used): "), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("1 tuning records in"), std::string::npos) << result.out;
}

TEST_F(CliTuning, JsonHoldsTheSameRecord) {
  CliResult result = tuning({"--json"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const nlohmann::json list = nlohmann::json::parse(result.out);
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["key"], record_.key);
  EXPECT_EQ(list[0]["choice"], record_.choice);
  ASSERT_EQ(list[0]["times"].size(), 2u);
  EXPECT_EQ(list[0]["times"][1]["tile"], "128x256x64x3-mma");
  EXPECT_DOUBLE_EQ(list[0]["times"][1]["ms"].get<double>(), 11.75);
}

TEST_F(CliTuning, ClearRemovesEveryRecord) {
  CliResult result = tuning({"--clear"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("removed 1 record files"), std::string::npos) << result.out;
  EXPECT_FALSE(load_tuning_record(cache_, record_.key).has_value());
  EXPECT_NE(tuning().out.find("0 tuning records"), std::string::npos);
}

TEST_F(CliTuning, AFolderOthersCanWriteIsRefused) {
  fs::permissions(cache_, fs::perms::group_write, fs::perm_options::add);
  CliResult result = tuning();
  EXPECT_NE(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.err.find("writable by its group"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace shardjit::testing
