// `shardjit info` works on any machine, GPU or not, and shows every environment knob.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/driver/device.hpp"
#include "runtime/env.hpp"
#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

TEST(CliInfo, PrintsVersionsDevicesCacheAndEveryKnob) {
  TempDir temp;
  const fs::path cache = temp.path() / "cache";
  CliResult result = run_cli({"--cache-dir", cache.string(), "info"}, temp.path(), {"SHARDJIT_LOG_LEVEL=error"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("shardjit:"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("NVRTC:"), std::string::npos);
  EXPECT_NE(result.out.find("sm_90a"), std::string::npos) << "the supported targets are listed";
  EXPECT_NE(result.out.find("CUDA driver:"), std::string::npos);
  EXPECT_NE(result.out.find("NCCL:"), std::string::npos);
  EXPECT_NE(result.out.find(cache.string()), std::string::npos);
  if (device_count() == 0) {
    EXPECT_NE(result.out.find("no GPU"), std::string::npos) << result.out;
  }
  for (const EnvKnob& knob : env_knobs()) {
    EXPECT_NE(result.out.find(knob.name), std::string::npos) << knob.name;
  }
  EXPECT_NE(result.out.find("SHARDJIT_LOG_LEVEL = error"), std::string::npos) << "current values are shown";
  EXPECT_FALSE(fs::exists(cache)) << "info must not create the cache";
}

TEST(CliInfo, JsonHasEverySection) {
  TempDir temp;
  CliResult result = run_cli({"--cache-dir", (temp.path() / "cache").string(), "info", "--json"}, temp.path());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  nlohmann::json info = nlohmann::json::parse(result.out);
  for (const char* key : {"version", "nvrtc", "driver", "nccl", "devices", "cache", "env"}) {
    EXPECT_TRUE(info.contains(key)) << key;
  }
  EXPECT_EQ(info.at("env").size(), env_knobs().size());
  EXPECT_EQ(info.at("devices").size(), static_cast<std::size_t>(device_count()));
  EXPECT_EQ(info.at("cache").at("entries"), 0);
}

TEST(CliInfo, VersionFlag) {
  TempDir temp;
  CliResult result = run_cli({"--version"}, temp.path());
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_NE(result.out.find("shardjit "), std::string::npos) << result.out;
}

}  // namespace
}  // namespace shardjit::testing
