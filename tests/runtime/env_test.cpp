// The environment knobs: read once into a RuntimeConfig, options set in code win, and a value
// that cannot be parsed is an error naming the variable and what was expected.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "runtime/env.hpp"
#include "shardjit/error.hpp"
#include "support/scoped_env.hpp"

namespace shardjit {
namespace {

using testing::ScopedEnv;

std::string error_of(const RuntimeOptions& options) {
  try {
    resolve_config(options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "no error";
}

TEST(Env, ParsesBoolsAndByteCounts) {
  EXPECT_EQ(parse_bool("off"), false);
  EXPECT_EQ(parse_bool("1"), true);
  EXPECT_FALSE(parse_bool("maybe").has_value());
  EXPECT_EQ(parse_bytes("500M"), 500ull << 20);
  EXPECT_EQ(parse_bytes("4G"), 4ull << 30);
  EXPECT_FALSE(parse_bytes("lots").has_value());
}

TEST(Env, PeerBlocksComeFromTheEnvironmentUnlessSetInCode) {
  {
    ScopedEnv env("SHARDJIT_PEER_BLOCKS", "24");
    EXPECT_EQ(resolve_config({}).peer_blocks, 24);
    RuntimeOptions options;
    options.peer_blocks = 8;
    EXPECT_EQ(resolve_config(options).peer_blocks, 8);
  }
  ScopedEnv unset("SHARDJIT_PEER_BLOCKS", "");
  EXPECT_EQ(resolve_config({}).peer_blocks, 0);
}

TEST(Env, ForwardExperimentKnobs) {
  {
    ScopedEnv tile("SHARDJIT_FWD_TILE", "64x256x32x3-mma");
    ScopedEnv splits("SHARDJIT_FWD_SPLITS", "132");
    const RuntimeConfig config = resolve_config({});
    EXPECT_EQ(config.fwd_tile, "64x256x32x3-mma");
    EXPECT_EQ(config.fwd_splits, 132);
  }
  {
    ScopedEnv splits("SHARDJIT_FWD_SPLITS", "2000");
    EXPECT_NE(error_of({}).find("SHARDJIT_FWD_SPLITS"), std::string::npos);
  }
  {
    ScopedEnv splits("SHARDJIT_FWD_SPLITS", "-1");
    EXPECT_NE(error_of({}).find("SHARDJIT_FWD_SPLITS"), std::string::npos);
  }
  ScopedEnv tile("SHARDJIT_FWD_TILE", "");
  ScopedEnv splits("SHARDJIT_FWD_SPLITS", "");
  EXPECT_EQ(resolve_config({}).fwd_tile, "");
  EXPECT_EQ(resolve_config({}).fwd_splits, 0);
}

// The forward's merge knob: the rule's by default and with auto, forced either way by a boolean.
TEST(Env, ForwardMergeKnob) {
  {
    ScopedEnv on("SHARDJIT_FWD_MERGE", "1");
    EXPECT_EQ(resolve_config({}).fwd_merge, 1);
  }
  {
    ScopedEnv off("SHARDJIT_FWD_MERGE", "off");
    EXPECT_EQ(resolve_config({}).fwd_merge, 0);
  }
  {
    ScopedEnv rule("SHARDJIT_FWD_MERGE", "auto");
    EXPECT_EQ(resolve_config({}).fwd_merge, -1);
  }
  {
    ScopedEnv bad("SHARDJIT_FWD_MERGE", "sometimes");
    EXPECT_NE(error_of({}).find("SHARDJIT_FWD_MERGE"), std::string::npos);
  }
  ScopedEnv unset("SHARDJIT_FWD_MERGE", "");
  EXPECT_EQ(resolve_config({}).fwd_merge, -1);
}

// The rules' on/off A/B knobs: on by default, off with 0, a bad word names the variable.
TEST(Env, RuleKnobs) {
  struct Knob {
    const char* name;
    const char* bad;
    bool RuntimeConfig::*field;
  };
  for (const Knob& knob : {Knob{"SHARDJIT_SPLIT_PARTIAL_WAVES", "half", &RuntimeConfig::split_partial_waves},
                           Knob{"SHARDJIT_BWD_CHUNK_WAVES", "narrow", &RuntimeConfig::bwd_chunk_waves},
                           Knob{"SHARDJIT_GEMM_ROWS_AS_N", "wide", &RuntimeConfig::gemm_rows_as_n},
                           Knob{"SHARDJIT_FWD_ROWS_AS_N", "tall", &RuntimeConfig::fwd_rows_as_n}}) {
    {
      ScopedEnv off(knob.name, "0");
      EXPECT_FALSE(resolve_config({}).*knob.field) << knob.name;
    }
    {
      ScopedEnv bad(knob.name, knob.bad);
      EXPECT_NE(error_of({}).find(knob.name), std::string::npos);
    }
    ScopedEnv unset(knob.name, "");
    EXPECT_TRUE(resolve_config({}).*knob.field) << knob.name;
  }
}

// The GEMM clusters' knob: the rule's (-1) by default and with auto, none with 0, a cluster's
// blocks from 1 to 8; anything else names the variable.
TEST(Env, SplitClustersKnob) {
  EXPECT_EQ(resolve_config({}).split_clusters, -1);
  for (const auto& [text, blocks] : {std::pair{"auto", -1}, {"0", 0}, {"1", 1}, {"2", 2}, {"8", 8}}) {
    ScopedEnv env("SHARDJIT_SPLIT_CLUSTERS", text);
    EXPECT_EQ(resolve_config({}).split_clusters, blocks) << text;
  }
  for (const char* bad : {"9", "-1", "some", "2x"}) {
    ScopedEnv env("SHARDJIT_SPLIT_CLUSTERS", bad);
    EXPECT_NE(error_of({}).find("SHARDJIT_SPLIT_CLUSTERS"), std::string::npos) << bad;
  }
}

TEST(Env, CompileJobsComeFromTheEnvironmentAndBadOnesNameTheVariable) {
  {
    ScopedEnv env("SHARDJIT_COMPILE_JOBS", "6");
    EXPECT_EQ(resolve_config({}).compile_jobs, 6);
    RuntimeOptions options;  // set in code: the environment does not override it
    options.compile_jobs = 2;
    EXPECT_EQ(resolve_config(options).compile_jobs, 2);
  }
  for (int bad : {-1, 4097}) {
    RuntimeOptions options;
    options.compile_jobs = bad;
    const std::string message = error_of(options);
    EXPECT_NE(message.find("RuntimeOptions::compile_jobs"), std::string::npos) << message;
  }
  {
    ScopedEnv env("SHARDJIT_COMPILE_JOBS", "lots");
    const std::string message = error_of({});
    EXPECT_NE(message.find("SHARDJIT_COMPILE_JOBS"), std::string::npos) << message;
    EXPECT_NE(message.find("0 (one per hardware thread)"), std::string::npos) << message;
  }
  ScopedEnv unset("SHARDJIT_COMPILE_JOBS", "");
  EXPECT_EQ(resolve_config({}).compile_jobs, 0);  // the cache sizes its pool by the hardware threads
}

// A bool knob: `default_value` while its variable is unset, the opposite once the variable says
// so, and an option set in code over the variable.
void expect_bool_knob(const char* name, bool RuntimeConfig::*field, std::optional<bool> RuntimeOptions::*option,
                      bool default_value) {
  {
    ScopedEnv unset(name, "");
    EXPECT_EQ(resolve_config({}).*field, default_value) << name;
  }
  ScopedEnv env(name, default_value ? "0" : "1");
  EXPECT_EQ(resolve_config({}).*field, !default_value) << name;
  RuntimeOptions options;
  options.*option = default_value;
  EXPECT_EQ(resolve_config(options).*field, default_value) << name;
}

TEST(Env, PeerLinesAreOnUnlessTheEnvironmentOrTheCodeTurnsThemOff) {
  expect_bool_knob("SHARDJIT_PEER_LINES", &RuntimeConfig::peer_lines, &RuntimeOptions::peer_lines, true);
  ScopedEnv bad("SHARDJIT_PEER_LINES", "sometimes");
  EXPECT_THROW(resolve_config({}), Error);
}

TEST(Env, HopperPathIsOnUnlessTheEnvironmentOrTheCodeTurnsItOff) {
  expect_bool_knob("SHARDJIT_HOPPER_PATH", &RuntimeConfig::hopper_path, &RuntimeOptions::hopper_path, true);
}

TEST(Env, AutotuneIsOffUnlessTheEnvironmentOrTheCodeTurnsItOn) {
  expect_bool_knob("SHARDJIT_AUTOTUNE", &RuntimeConfig::autotune, &RuntimeOptions::autotune, false);
}

TEST(Env, BadValuesNameTheVariableAndWhatWasExpected) {
  {
    ScopedEnv env("SHARDJIT_PEER_BLOCKS", "many");
    const std::string message = error_of({});
    EXPECT_NE(message.find("SHARDJIT_PEER_BLOCKS"), std::string::npos) << message;
    EXPECT_NE(message.find("0 (one per SM) to 4096"), std::string::npos) << message;
  }
  {
    ScopedEnv env("SHARDJIT_PEER_BLOCKS", "-3");
    EXPECT_NE(error_of({}).find("SHARDJIT_PEER_BLOCKS"), std::string::npos);
  }
  {
    ScopedEnv env("SHARDJIT_JIT", "perhaps");
    EXPECT_NE(error_of({}).find("SHARDJIT_JIT"), std::string::npos);
  }
  {
    ScopedEnv env("SHARDJIT_HOPPER_PATH", "wgmma");
    EXPECT_NE(error_of({}).find("SHARDJIT_HOPPER_PATH"), std::string::npos);
  }
  {
    ScopedEnv env("SHARDJIT_AUTOTUNE", "sometimes");
    EXPECT_NE(error_of({}).find("SHARDJIT_AUTOTUNE"), std::string::npos);
  }
  {
    ScopedEnv env("SHARDJIT_LOG_LEVEL", "loud");
    const std::string message = error_of({});
    EXPECT_NE(message.find("SHARDJIT_LOG_LEVEL='loud'"), std::string::npos) << message;
    EXPECT_NE(message.find("warn"), std::string::npos) << message;
  }
  RuntimeOptions negative;
  negative.peer_blocks = -1;
  EXPECT_NE(error_of(negative).find("peer_blocks"), std::string::npos);
}

// A bool knob's error lists every word parse_bool takes, not only 0 and 1.
TEST(Env, ABoolKnobsErrorListsTheWordsItAccepts) {
  for (const char* word : {"yes", "off", "TRUE"}) {
    ScopedEnv env("SHARDJIT_JIT", word);
    EXPECT_NO_THROW(resolve_config({})) << word;
  }
  ScopedEnv env("SHARDJIT_JIT", "perhaps");
  const std::string message = error_of({});
  for (const char* word : {"0 or 1", "true", "off", "yes"}) {
    EXPECT_NE(message.find(word), std::string::npos) << word << ": " << message;
  }
}

// A path set in code (C++, or Python through it) may hold a NUL byte, which the system would
// read as the end of the path: refused, naming the option.
TEST(Env, PathOptionsWithANulByteAreRefused) {
  const std::string nul = std::string("/tmp/shardjit-nul") + '\0' + "suffix";
  RuntimeOptions cache;
  cache.cache_dir = nul;
  EXPECT_NE(error_of(cache).find("cache_dir"), std::string::npos);
  RuntimeOptions templates;
  templates.template_dir = nul;
  EXPECT_NE(error_of(templates).find("template_dir"), std::string::npos);
  RuntimeOptions dump;
  dump.dump_dir = nul;
  const std::string message = error_of(dump);
  EXPECT_NE(message.find("dump_dir"), std::string::npos) << message;
  EXPECT_NE(message.find("NUL"), std::string::npos) << message;
}

}  // namespace
}  // namespace shardjit
