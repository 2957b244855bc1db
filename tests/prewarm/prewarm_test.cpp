// shardjit::prewarm, the public C++ prewarm: what it compiles, that a second call finds it all
// cached, and its errors.
#include "shardjit/prewarm.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

using testing::TempDir;

PrewarmConfig small_model() {
  PrewarmConfig config;
  config.hidden = 64;
  config.vocab = 300;
  config.archs = {"sm_80"};
  config.jobs = 2;
  return config;
}

Runtime runtime_in(const TempDir& temp, bool jit = true) {
  RuntimeOptions options;
  options.cache_dir = (temp.path() / "cache").string();
  options.jit = jit;
  return Runtime(options);
}

TEST(Prewarm, CompilesOnceThenFindsEverythingCached) {
  TempDir temp;
  Runtime runtime = runtime_in(temp);
  const PrewarmResult first = prewarm(runtime, small_model());
  EXPECT_TRUE(first.failures.empty()) << first.failures.front();
  EXPECT_GT(first.total, 0u);
  EXPECT_EQ(first.compiled, first.total);
  EXPECT_EQ(first.cached, 0u);

  Runtime later = runtime_in(temp);  // another process's view: the disk cache only
  PrewarmConfig defaults = small_model();
  defaults.jobs = PrewarmConfig{}.jobs;  // 0: one per hardware thread, as the CLI
  ASSERT_EQ(defaults.jobs, 0);
  const PrewarmResult again = prewarm(later, defaults);
  EXPECT_EQ(again.total, first.total);
  EXPECT_EQ(again.cached, again.total);
  EXPECT_EQ(again.compiled, 0u);
}

TEST(Prewarm, MoreSettingsAskForMoreKernels) {
  TempDir temp;
  Runtime runtime = runtime_in(temp);
  PrewarmConfig config = small_model();
  const std::size_t forward_only = prewarm(runtime, config).total;
  config.backward = true;
  config.tp = {1, 2};
  const PrewarmResult wider = prewarm(runtime, config);
  EXPECT_TRUE(wider.failures.empty());
  EXPECT_GT(wider.total, forward_only);
  EXPECT_EQ(wider.cached, forward_only);  // the forward-only kernels were already there
}

void expect_invalid(Runtime& runtime, const PrewarmConfig& config, const char* says) {
  try {
    prewarm(runtime, config);
    FAIL() << "accepted a config that should be refused for: " << says;
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find(says), std::string::npos) << error.what();
  }
}

// The kernels `collectives` adds to a prewarm of small_model at one TP degree.
std::size_t collective_kernels_added(Runtime& runtime, int tp) {
  PrewarmConfig config = small_model();
  config.tp = {tp};
  const std::size_t without = prewarm(runtime, config).total;
  config.collectives = true;
  const PrewarmResult with = prewarm(runtime, config);
  EXPECT_TRUE(with.failures.empty()) << with.failures.front();
  return with.total - without;
}

// A group of one rank loads MoeCombine's kernels (with and without gates) but no ReduceScatter
// kernel (its one-rank reduce-scatter is a copy); two ranks load all three.
TEST(Prewarm, CollectivesAtEveryTpDegree) {
  TempDir temp;
  Runtime runtime = runtime_in(temp);
  EXPECT_EQ(collective_kernels_added(runtime, 1), 2u);
  EXPECT_EQ(collective_kernels_added(runtime, 2), 3u);
}

TEST(Prewarm, BadConfigsAreClearErrors) {
  TempDir temp;
  Runtime runtime = runtime_in(temp);
  PrewarmConfig config = small_model();
  config.archs.clear();
  expect_invalid(runtime, config, "archs");
  // Every list empty in turn: a prewarm of nothing must not report success.
  const std::pair<const char*, void (*)(PrewarmConfig&)> emptied[] = {
      {"tp: expected at least one value", [](PrewarmConfig& c) { c.tp.clear(); }},
      {"dtypes: expected at least one value", [](PrewarmConfig& c) { c.dtypes.clear(); }},
      {"target_dtypes: expected at least one value", [](PrewarmConfig& c) { c.target_dtypes.clear(); }},
      {"bias_dtypes: expected at least one value", [](PrewarmConfig& c) { c.bias_dtypes.clear(); }},
      {"entropy: expected at least one value", [](PrewarmConfig& c) { c.entropy.clear(); }},
  };
  for (const auto& [says, empty] : emptied) {
    config = small_model();
    empty(config);
    expect_invalid(runtime, config, says);
  }
  config = small_model();
  config.jobs = -1;
  expect_invalid(runtime, config, "jobs: expected 1 or more, or 0 for one per hardware thread, got -1");
  // Variants of the backward without it, and an arch NVRTC cannot build for: refused, not a
  // prewarm of nothing or of failures only.
  config = small_model();
  config.dz_fp32 = true;
  expect_invalid(runtime, config, "dz_fp32 adds variants of the backward's kernels; expected backward with it");
  config = small_model();
  config.grad_filter = true;
  expect_invalid(runtime, config, "grad_filter adds variants of the backward's kernels; expected backward with it");
  for (const char* arch : {"sm_75", "bogus"}) {
    config = small_model();
    config.archs = {"sm_80", arch};
    expect_invalid(runtime, config, (std::string("archs: unknown or unsupported compile target '") + arch + "'").c_str());
  }
  config = small_model();
  config.hidden = 0;
  expect_invalid(runtime, config, "hidden");
  Runtime cache_only = runtime_in(temp, false);
  expect_invalid(cache_only, small_model(), "JIT off");
}

}  // namespace
}  // namespace shardjit
