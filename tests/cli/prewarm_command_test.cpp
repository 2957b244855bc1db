// `shardjit prewarm` as a user runs it: compiles what a model needs once, then finds it cached.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "runtime/driver/device.hpp"
#include "runtime/ops/collective/kernels.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/cli/tiny_model.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

class CliPrewarm : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directory(scratch_); }
  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
};

TEST_F(CliPrewarm, CompilesEveryKernelOnceThenFindsThemCached) {
  const std::size_t n = tiny_kernel_count();
  CliResult first = run_cli(tiny_prewarm_args(cache_), scratch_);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << first.out;
  EXPECT_EQ(cache_entries(cache_).size(), n);
  // Not a terminal: one progress line per kernel, the last one counting all of them.
  EXPECT_NE(first.err.find("[" + std::to_string(n) + "/" + std::to_string(n) + "] compiled"), std::string::npos)
      << first.err;
  EXPECT_EQ(first.err.find('\r'), std::string::npos);

  CliResult second = run_cli(tiny_prewarm_args(cache_), scratch_);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find(prewarm_summary(n, 0, n, 0)), std::string::npos) << second.out;
  EXPECT_EQ(cache_entries(cache_).size(), n);
}

TEST_F(CliPrewarm, CompilesEvenWhenTheEnvironmentSaysCacheOnly) {
  const std::size_t n = tiny_kernel_count();
  CliResult result = run_cli(tiny_prewarm_args(cache_), scratch_, {"SHARDJIT_JIT=0"});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << result.out;
}

TEST_F(CliPrewarm, CacheDirFromTheEnvironmentIsUsedWithoutTheOption) {
  std::vector<std::string> args = tiny_prewarm_args(cache_);
  args.erase(args.begin(), args.begin() + 2);  // drop --cache-dir DIR
  CliResult result = run_cli(args, scratch_, {"SHARDJIT_CACHE_DIR=" + cache_.string()});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(cache_entries(cache_).size(), tiny_kernel_count());
}

// A cache capped below what the prewarm builds evicts some of its kernels to make room for the
// later ones: the prewarm names each kernel that is gone and fails, since a cache-only server
// would not find them.
TEST_F(CliPrewarm, KernelsEvictedByTheSizeCapAreNamedAndFail) {
  const std::size_t n = tiny_kernel_count();
  ASSERT_GE(n, 2u);
  CliResult result = run_cli(tiny_prewarm_args(cache_), scratch_, {"SHARDJIT_CACHE_MAX_BYTES=1"});
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << result.out;
  // The store keeps the entry it has just written: only the last one is left.
  ASSERT_EQ(cache_entries(cache_).size(), 1u);
  EXPECT_NE(result.out.find(std::to_string(n - 1) + " of those kernels are not in the cache folder"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.err.find("missing: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("SHARDJIT_CACHE_MAX_BYTES"), std::string::npos) << result.err;

  CliResult uncapped = run_cli(tiny_prewarm_args(cache_), scratch_);
  EXPECT_EQ(uncapped.exit_code, 0) << uncapped.out << uncapped.err;
  EXPECT_EQ(cache_entries(cache_).size(), n);
}

// A template that does not compile fails its kernels only; the others are built and stored, the
// failure is named with NVRTC's message, and the exit code says something failed.
TEST_F(CliPrewarm, ReportsFailedKernelsAndExitsOne) {
  const fs::path templates = temp_.path() / "templates";
  fs::copy(fs::path(SHARDJIT_SOURCE_DIR) / "templates", templates, fs::copy_options::recursive);
  std::ofstream(templates / "linear_logp" / "fwd.cuh", std::ios::app) << "\nthis is not C++;\n";

  const std::size_t n = tiny_kernel_count();
  CliResult result = run_cli(tiny_prewarm_args(cache_), scratch_, {"SHARDJIT_TEMPLATE_DIR=" + templates.string()});
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find(prewarm_summary(n, n - 1, 0, 1)), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("failed: linear_logp_fwd<"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("fwd.cuh"), std::string::npos) << result.err;
  EXPECT_EQ(cache_entries(cache_).size(), n - 1);
  EXPECT_TRUE(cache_temp_files(cache_).empty());
}

TEST_F(CliPrewarm, HiddenAndVocabOptionsNeedNoConfigFile) {
  CliResult result = run_cli({"--cache-dir", cache_.string(), "prewarm", "--hidden", "64", "--vocab", "300",
                              "--shard", "0:300", "--arch", kTinyArch, "--jobs", "2"},
                             scratch_);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  // The same shapes as tiny.json at TP 1, so the same kernels.
  const std::size_t n = tiny_kernel_count();
  EXPECT_NE(result.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << result.out;
}

// A list option takes one word: the config file after it is still a config file.
TEST_F(CliPrewarm, ListOptionsLeaveTheConfigFileThatFollowsThem) {
  CliResult result = run_cli({"--cache-dir", cache_.string(), "prewarm", "--jobs", "2", "--targets", "int64",
                              "--arch", kTinyArch, test_data("tiny.json").string()},
                             scratch_);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::size_t n = tiny_kernel_count();
  EXPECT_NE(result.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << result.out;
}

TEST_F(CliPrewarm, BackwardVariantsNeedTheBackward) {
  for (const char* flag : {"--dz-fp32", "--grad-filter"}) {
    CliResult result = run_cli({"--cache-dir", cache_.string(), "prewarm", "--hidden", "64", "--vocab", "300",
                                "--arch", kTinyArch, flag},
                               scratch_);
    EXPECT_NE(result.exit_code, 0) << flag;
    EXPECT_NE(result.err.find("--backward"), std::string::npos) << flag << ": " << result.err;
    EXPECT_TRUE(cache_entries(cache_).empty()) << flag;
  }
}

// A TP rank's LinearLogp in cache-only mode names `shardjit prewarm ... --shard START:SIZE --tp N`;
// that command, as the op words it, builds exactly the kernels of that rank's shard at that degree.
TEST_F(CliPrewarm, TheCacheOnlyHintOfATpRankBuildsItsShard) {
  LinearLogpConfig config;
  config.hidden = 64;
  config.vocab_start = 150;
  config.vocab_local = 150;
  config.vocab_global = 300;
  const std::string hint = prewarm_command(resolve_layout(config), kTinyArch, true, 2);
  ASSERT_EQ(hint.rfind("shardjit prewarm ", 0), 0u) << hint;
  ASSERT_NE(hint.find(" --shard 150:150"), std::string::npos) << hint;
  ASSERT_NE(hint.find(" --tp 2"), std::string::npos) << hint;
  std::vector<std::string> args = {"--cache-dir", cache_.string()};
  std::istringstream words(hint.substr(std::string("shardjit ").size()));
  for (std::string word; words >> word;) args.push_back(word);
  args.insert(args.end(), {"--jobs", "2"});

  CliResult result = run_cli(args, scratch_);
  ASSERT_EQ(result.exit_code, 0) << hint << "\n" << result.out << result.err;
  PrewarmRequest request;
  request.models = {ModelShape{"tiny", 64, 300, 0}};
  request.archs = {kTinyArch};
  request.tp = {2};
  request.shard = ShardRange{150, 150};
  const std::size_t n = prewarm_items(request).size();
  EXPECT_NE(result.out.find(prewarm_summary(n, n, 0, 0)), std::string::npos) << hint << "\n" << result.out;
  EXPECT_EQ(cache_entries(cache_).size(), n);
}

// What a server running ReduceScatter / MoeCombine in cache-only mode needs, from the command
// the ops name in their cache-only error: one reduce-scatter kernel, and the MoE combine with
// and without gates.
TEST_F(CliPrewarm, CollectivesOnlyNeedTheHiddenSizeAndATpDegree) {
  CliResult result = run_cli({"--cache-dir", cache_.string(), "prewarm", "--collectives-only", "--hidden", "64",
                              "--tp", "2", "--dtype", "bf16", "--arch", kTinyArch, "--jobs", "2"},
                             scratch_);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find(prewarm_summary(3, 3, 0, 0)), std::string::npos) << result.out;
  EXPECT_EQ(cache_entries(cache_).size(), 3u);
}

// --tune times kernels on a GPU: without one it is refused before anything is compiled.
TEST_F(CliPrewarm, TuneWithoutAGpuIsRefusedBeforeAnyCompile) {
  if (device_count() > 0) GTEST_SKIP() << "this machine has a GPU; the refusal is for machines without one";
  std::vector<std::string> args = tiny_prewarm_args(cache_);
  args.push_back("--tune");
  CliResult result = run_cli(args, scratch_);
  EXPECT_NE(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.err.find("--tune"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("no GPU"), std::string::npos) << result.err;
  EXPECT_TRUE(cache_entries(cache_).empty());
}

// A group of one rank runs both ops on NCCL's path: ReduceScatter is a copy and loads no kernel,
// while MoeCombine still loads its combine, with and without gates. The command a one-rank
// MoeCombine names in its cache-only error compiles those two.
TEST_F(CliPrewarm, OneRankCollectivesAreMoeCombinesTwoKernels) {
  const std::string command = collective_prewarm_command(DType::kBF16, 1, 64, kTinyArch);
  std::istringstream words(command);
  std::vector<std::string> args = {"--cache-dir", cache_.string()};
  std::string word;
  words >> word;
  ASSERT_EQ(word, "shardjit") << command;
  while (words >> word) args.push_back(word);
  args.insert(args.end(), {"--jobs", "2"});
  CliResult result = run_cli(args, scratch_);
  ASSERT_EQ(result.exit_code, 0) << command << "\n" << result.out << result.err;
  EXPECT_NE(result.out.find(prewarm_summary(2, 2, 0, 0)), std::string::npos) << result.out;
  EXPECT_EQ(cache_entries(cache_).size(), 2u);
  const std::vector<KernelSpec> specs = collective_kernels(DType::kBF16, 1, 64);
  ASSERT_EQ(specs.size(), 2u);
  for (const KernelSpec& spec : specs) EXPECT_EQ(spec.template_name(), "moe_combine");
}

}  // namespace
}  // namespace shardjit::testing
