// Host-side checks of a LinearLogp configuration: every bad field is a clear error at build.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/ops/linear_logp/layout.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

LinearLogpConfig valid_config() {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 64128;
  c.vocab_start = 64128;
  c.vocab_global = 128256;
  return c;
}

void expect_rejected(LinearLogpConfig config, const std::string& needle) {
  try {
    resolve_layout(config);
    FAIL() << "expected rejection mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LinearLogpLayout, ResolvesDefaults) {
  LinearLogpConfig c;
  c.hidden = 64;
  c.vocab_local = 300;
  LinearLogpLayout layout = resolve_layout(c);
  EXPECT_EQ(layout.config.vocab_global, 300);
  EXPECT_EQ(layout.config.valid_vocab, 300);
  EXPECT_EQ(layout.valid_local, 300);
}

TEST(LinearLogpLayout, PaddingShrinksTheValidColumnsOfTheLastShard) {
  LinearLogpConfig c = valid_config();
  c.valid_vocab = 128000;
  EXPECT_EQ(resolve_layout(c).valid_local, 128000 - 64128);
  c.vocab_start = 0;
  EXPECT_EQ(resolve_layout(c).valid_local, 64128);
}

TEST(LinearLogpLayout, RejectsBadFields) {
  auto with = [](auto change) {
    LinearLogpConfig c = valid_config();
    change(c);
    return c;
  };
  expect_rejected(with([](auto& c) { c.hidden = 100; }), "multiple of 8");
  expect_rejected(with([](auto& c) { c.hidden = 0; }), "hidden");
  expect_rejected(with([](auto& c) { c.vocab_local = 0; }), "vocab_local");
  expect_rejected(with([](auto& c) { c.vocab_start = -1; }), "vocab_start");
  expect_rejected(with([](auto& c) { c.vocab_start = INT64_MAX - 10; }), "vocab_start = 9223372036854775797");
  expect_rejected(with([](auto& c) { c.vocab_global = INT64_MAX; }), "vocab_global = 9223372036854775807");
  expect_rejected(with([](auto& c) { c.vocab_global = 100000; }), "vocab_global");
  expect_rejected(with([](auto& c) { c.valid_vocab = 200000; }), "valid_vocab");
  expect_rejected(with([](auto& c) { c.temperature = 0.0f; }), "temperature");
  expect_rejected(with([](auto& c) { c.temperature = -1.0f; }), "temperature");
  expect_rejected(with([](auto& c) { c.temperature = 1e-39f; }), "temperature = 1.00000022e-39");  // 1 / T is infinite
  expect_rejected(with([](auto& c) { c.dtype = DType::kInt32; }), "dtype");
  expect_rejected(with([](auto& c) { c.bias_dtype = DType::kInt64; }), "bias_dtype");
  expect_rejected(with([](auto& c) { c.target_dtype = DType::kFP32; }), "target_dtype");
  expect_rejected(with([](auto& c) { c.max_rows = -5; }), "max_rows");
}

TEST(LinearLogpLayout, ASingleGpuOpHoldsTheWholeVocabulary) {
  LinearLogpConfig whole;
  whole.hidden = 64;
  whole.vocab_local = 300;
  EXPECT_EQ(resolve_single_gpu_layout(whole).config.vocab_global, 300);
  whole.vocab_global = 300;
  whole.valid_vocab = 290;
  EXPECT_EQ(resolve_single_gpu_layout(whole).valid_local, 290);
  LinearLogpConfig first_shard = valid_config();
  first_shard.vocab_start = 0;
  for (const LinearLogpConfig& shard : {valid_config(), first_shard}) {
    try {
      resolve_single_gpu_layout(shard);
      FAIL() << "a shard of " << shard.vocab_global << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("tensor-parallel constructor"), std::string::npos) << e.what();
    }
  }
}

TEST(LinearLogpLayout, PrewarmCommandNamesEverythingTheKernelsDependOn) {
  LinearLogpConfig c = valid_config();
  c.valid_vocab = 128000;
  c.want_entropy = true;
  c.bias_dtype = DType::kFP32;
  const std::string command = prewarm_command(resolve_layout(c), "sm_90a");
  for (const char* part : {"--hidden 4096", "--vocab 128256", "--valid-vocab 128000", "--shard 64128:64128",
                           "--dtype bf16", "--targets int64", "--bias fp32", "--entropy on", "--arch sm_90a"}) {
    EXPECT_NE(command.find(part), std::string::npos) << part << " missing from: " << command;
  }
  EXPECT_EQ(command.rfind("SHARDJIT_HOPPER_PATH=1 shardjit prewarm", 0), 0u) << command;
}

TEST(LinearLogpLayout, PrewarmCommandNamesTheBackwardVariants) {
  LinearLogpConfig c = valid_config();
  c.want_backward = true;
  EXPECT_EQ(prewarm_command(resolve_layout(c), "sm_90a").find("--dz-fp32"), std::string::npos);
  c.dz_fp32 = true;
  c.grad_filter_threshold = 1e-4f;
  const std::string command = prewarm_command(resolve_layout(c), "sm_90a");
  for (const char* part : {"--backward", "--dz-fp32", "--grad-filter"}) {
    EXPECT_NE(command.find(part), std::string::npos) << part << " missing from: " << command;
  }
}

TEST(LinearLogpLayout, PrewarmCommandCarriesTheHopperSwitchWhereItChangesTheKernels) {
  const LinearLogpLayout layout = resolve_layout(valid_config());
  EXPECT_EQ(prewarm_command(layout, "sm_90a", false).rfind("SHARDJIT_HOPPER_PATH=0 shardjit prewarm", 0), 0u);
  EXPECT_EQ(prewarm_command(layout, "sm_90a", true).rfind("SHARDJIT_HOPPER_PATH=1 shardjit prewarm", 0), 0u);
  EXPECT_EQ(prewarm_command(layout, "sm_80", false).rfind("shardjit prewarm", 0), 0u) << "no Hopper loop there";
  LinearLogpConfig fp32 = valid_config();
  fp32.dtype = DType::kFP32;
  EXPECT_EQ(prewarm_command(resolve_layout(fp32), "sm_90a", false).rfind("shardjit prewarm", 0), 0u)
      << "fp32 has one loop";
}

}  // namespace
}  // namespace shardjit
