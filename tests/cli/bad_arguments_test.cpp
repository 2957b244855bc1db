// Every kind of bad input gives one clear line on stderr, a non-zero exit code, and leaves no
// kernel in the cache.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "runtime/driver/device.hpp"
#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/cli/tiny_model.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

struct BadCase {
  const char* name;
  std::vector<std::string> args;  // after "--cache-dir DIR"; @DIR@ stands for a scratch folder
  std::string expected;           // a part of the error message
  int exit_code = 2;
};

void PrintTo(const BadCase& bad, std::ostream* out) { *out << bad.name; }

const std::string kTiny = test_data("tiny.json").string();

std::vector<BadCase> bad_cases() {
  return {
      {"UnknownArch", {"prewarm", kTiny, "--arch", "sm_999"}, "compile target 'sm_999'"},
      {"ArchOlderThanTheKernels", {"prewarm", kTiny, "--arch", "sm_75"}, "need sm_80 or newer"},
      {"OneBadArchAmongGood", {"prewarm", kTiny, "--arch", "sm_80,sm_999"}, "compile target 'sm_999'"},
      {"MalformedJson", {"prewarm", "@DIR@/malformed.json", "--arch", "sm_80"}, "malformed.json: not valid JSON"},
      {"MissingVocab", {"prewarm", "@DIR@/no_vocab.json", "--arch", "sm_80"}, "no vocab_size"},
      {"HiddenNotMultipleOf8", {"prewarm", "@DIR@/hidden_60.json", "--arch", "sm_80"}, "hidden = 60"},
      {"HiddenNotInteger", {"prewarm", "@DIR@/hidden_float.json", "--arch", "sm_80"}, "hidden_size is 64.5"},
      {"NoSuchFile", {"prewarm", "@DIR@/absent.json", "--arch", "sm_80"}, "absent.json' does not exist"},
      {"TpZero", {"prewarm", kTiny, "--arch", "sm_80", "--tp", "0"}, "--tp '0'"},
      {"TpNotANumber", {"prewarm", kTiny, "--arch", "sm_80", "--tp", "1,two"}, "--tp 'two'"},
      {"TpLargerThanVocab", {"prewarm", kTiny, "--arch", "sm_80", "--tp", "512"}, "split over 512 ranks"},
      {"JobsZero", {"prewarm", kTiny, "--arch", "sm_80", "--jobs", "0"}, "--jobs '0'"},
      {"JobsNotANumber", {"prewarm", kTiny, "--arch", "sm_80", "--jobs", "many"}, "--jobs 'many'"},
      {"BadDtype", {"prewarm", kTiny, "--arch", "sm_80", "--dtype", "int8"}, "--dtype 'int8'"},
      {"BadTargets", {"prewarm", kTiny, "--arch", "sm_80", "--targets", "fp16"}, "--targets 'fp16'"},
      {"BadBias", {"prewarm", kTiny, "--arch", "sm_80", "--bias", "int64"}, "--bias 'int64'"},
      {"BadEntropy", {"prewarm", kTiny, "--arch", "sm_80", "--entropy", "sometimes"}, "--entropy 'sometimes'"},
      {"BadShard", {"prewarm", kTiny, "--arch", "sm_80", "--shard", "10"}, "--shard '10'"},
      {"ShardPastVocab", {"prewarm", kTiny, "--arch", "sm_80", "--shard", "200:200"}, "vocab_global"},
      {"ValidVocabPastVocab", {"prewarm", "--hidden", "64", "--vocab", "300", "--valid-vocab", "301", "--arch", "sm_80"},
       "valid_vocab = 301"},
      {"ValidVocabZero", {"prewarm", "--hidden", "64", "--vocab", "300", "--valid-vocab", "0", "--arch", "sm_80"},
       "--valid-vocab '0'"},
      {"VocabPastInt64", {"prewarm", "--hidden", "64", "--vocab", "99999999999999999999", "--arch", "sm_80"},
       "--vocab '99999999999999999999'"},
      {"HiddenNotANumber", {"prewarm", "--hidden", "4k", "--vocab", "300", "--arch", "sm_80"}, "--hidden '4k'"},
      {"HiddenWithoutVocab", {"prewarm", "--hidden", "64", "--arch", "sm_80"}, "--hidden requires --vocab"},
      {"CollectivesOnlyWithBackward", {"prewarm", "--collectives-only", "--hidden", "64", "--backward", "--arch", "sm_80"},
       "--backward"},
      {"CollectivesOnlyWithShard",
       {"prewarm", "--collectives-only", "--hidden", "64", "--shard", "0:5", "--arch", "sm_80"}, "--shard"},
      {"SplitLeavingARankNoRows", {"prewarm", "--hidden", "64", "--vocab", "9", "--tp", "4", "--arch", "sm_80"},
       "cannot be split evenly over 4 ranks"},
      {"NoModel", {"prewarm", "--arch", "sm_80"}, "no model given"},
      {"UnknownOption", {"prewarm", kTiny, "--arch", "sm_80", "--fast"}, "--fast"},
      {"UnknownCommand", {"compile", kTiny}, "compile"},
      {"NoCommand", {}, "no command given; expected prewarm"},
      {"BadLogLevel", {"--log-level", "loud", "prewarm", kTiny, "--arch", "sm_80"}, "unknown log level 'loud'"},
      {"BadGcSize", {"gc", "--max-size", "2X"}, "--max-size '2X'"},
      {"TuningClearWithJson", {"tuning", "--clear", "--json"}, "excludes --clear"},
  };
}

class CliBadArguments : public ::testing::TestWithParam<BadCase> {
 protected:
  void SetUp() override {
    fs::create_directory(scratch_);
    std::ofstream(scratch_ / "malformed.json") << R"({"hidden_size": 64, "vocab_size": 300)";
    std::ofstream(scratch_ / "no_vocab.json") << R"({"hidden_size": 64, "torch_dtype": "bfloat16"})";
    std::ofstream(scratch_ / "hidden_60.json") << R"({"hidden_size": 60, "vocab_size": 300})";
    std::ofstream(scratch_ / "hidden_float.json") << R"({"hidden_size": 64.5, "vocab_size": 300})";
  }

  std::vector<std::string> args(const BadCase& bad) const {
    std::vector<std::string> result = {"--cache-dir", cache_.string()};
    for (std::string arg : bad.args) {
      if (arg.rfind("@DIR@", 0) == 0) arg = scratch_.string() + arg.substr(5);
      result.push_back(arg);
    }
    return result;
  }

  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
};

TEST_P(CliBadArguments, FailWithOneClearLineAndNoKernelInTheCache) {
  const BadCase& bad = GetParam();
  CliResult result = run_cli(args(bad), scratch_);
  EXPECT_EQ(result.exit_code, bad.exit_code) << result.err;
  EXPECT_NE(result.err.find(bad.expected), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_TRUE(result.out.empty()) << result.out;
  EXPECT_TRUE(cache_entries(cache_).empty());
  EXPECT_TRUE(cache_temp_files(cache_).empty());
}

INSTANTIATE_TEST_SUITE_P(Cases, CliBadArguments, ::testing::ValuesIn(bad_cases()),
                         [](const ::testing::TestParamInfo<BadCase>& param_info) { return std::string(param_info.param.name); });

// Without --arch the arch of GPU 0 is used; on a machine without one that is an error that says
// what to pass.
TEST(CliBadArgumentsWithoutGpu, NoArchAndNoGpuAsksForArch) {
  if (device_count() > 0) GTEST_SKIP() << "this machine has a GPU, whose arch is the default";
  TempDir temp;
  CliResult result = run_cli({"--cache-dir", (temp.path() / "cache").string(), "prewarm", kTiny}, temp.path());
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("pass --arch"), std::string::npos) << result.err;
  EXPECT_FALSE(fs::exists(temp.path() / "cache"));
}

}  // namespace
}  // namespace shardjit::testing
