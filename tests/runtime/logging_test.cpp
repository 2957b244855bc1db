// The log handler (shardjit/logging.hpp): a program takes the library's lines instead of stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/logging.hpp"
#include "shardjit/c_api.h"
#include "shardjit/error.hpp"
#include "shardjit/logging.hpp"
#include "shardjit/runtime.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

using Lines = std::vector<std::pair<LogLevel, std::string>>;

// Restores stderr and the default level whatever the test does.
class LogHandlerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_log_handler(nullptr);
    set_log_level("warn");
  }

  LogHandler recorder() {
    return [this](LogLevel level, std::string_view text) {
      const std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(level, std::string(text));
    };
  }
  Lines lines() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  Lines lines_;
};

TEST_F(LogHandlerTest, TakesTheLinesAtOrAboveTheLevelWithTheirLevelAndText) {
  set_log_handler(recorder());
  set_log_level("info");
  log().debug("below the level {}", 1);
  log().info("compiles {} of its {} kernels", 3, 10);
  log().warn("the kernel cache '{}' is not writable", "/x");
  log().error("failed");
  EXPECT_EQ(lines(), (Lines{{LogLevel::kInfo, "compiles 3 of its 10 kernels"},
                            {LogLevel::kWarn, "the kernel cache '/x' is not writable"},
                            {LogLevel::kError, "failed"}}));
}

// The level is the process's: a Runtime made with a level sets it, one made with neither a level
// nor SHARDJIT_LOG_LEVEL leaves it, so that building one with defaults (a library's, a tool's)
// never silences another's lines.
TEST_F(LogHandlerTest, ARuntimeWithoutALevelLeavesTheProcesssLevel) {
  if (std::getenv("SHARDJIT_LOG_LEVEL") != nullptr) GTEST_SKIP() << "SHARDJIT_LOG_LEVEL is set for this run";
  testing::TempDir temp;
  RuntimeOptions chosen;
  chosen.cache_dir = (temp.path() / "cache").string();
  chosen.log_level = "info";
  Runtime informative(chosen);
  EXPECT_EQ(log().level(), spdlog::level::info);
  RuntimeOptions defaults;
  defaults.cache_dir = chosen.cache_dir;
  Runtime plain(defaults);
  EXPECT_EQ(log().level(), spdlog::level::info);
  chosen.log_level = "error";
  Runtime quiet(chosen);
  EXPECT_EQ(log().level(), spdlog::level::err);
}

TEST_F(LogHandlerTest, AnEmptyHandlerGivesTheLinesBackToStderr) {
  set_log_handler(recorder());
  log().warn("to the handler");
  set_log_handler(nullptr);
  ::testing::internal::CaptureStderr();
  log().warn("to stderr");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(lines(), (Lines{{LogLevel::kWarn, "to the handler"}}));
  EXPECT_NE(err.find("to stderr"), std::string::npos) << err;
  EXPECT_NE(err.find("shardjit"), std::string::npos) << "stderr lines keep the logger's name: " << err;
}

TEST_F(LogHandlerTest, LinesFromManyThreadsReachTheHandlerOneAtATime) {
  int inside = 0, most_inside = 0, count = 0;
  std::mutex counters;
  set_log_handler([&](LogLevel, std::string_view) {
    {
      const std::lock_guard<std::mutex> lock(counters);
      most_inside = std::max(most_inside, ++inside);
      ++count;
    }
    const std::lock_guard<std::mutex> lock(counters);
    --inside;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 200; ++i) log().warn("line {}", i);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(count, 8 * 200);
  EXPECT_EQ(most_inside, 1);
}

TEST_F(LogHandlerTest, AHandlerThatLogsOrReplacesItselfDoesNotDeadlock) {
  bool replace_refused = false;
  set_log_handler([&](LogLevel, std::string_view text) {
    if (text == "log from the handler") log().warn("logged inside the handler");  // to stderr
    try {
      set_log_handler(nullptr);
    } catch (const Error& error) {
      replace_refused = std::string(error.what()).find("inside the log handler") != std::string::npos;
    }
  });
  ::testing::internal::CaptureStderr();
  log().warn("log from the handler");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("logged inside the handler"), std::string::npos) << err;
  EXPECT_TRUE(replace_refused);
}

TEST_F(LogHandlerTest, TheCApiHandlerGetsTheLevelTheTextAndTheUserPointer) {
  struct Seen {
    int level = -1;
    std::string text;
  } seen;
  ASSERT_EQ(shardjit_set_log_handler(
                [](int level, const char* text, void* user) {
                  auto* into = static_cast<Seen*>(user);
                  into->level = level;
                  into->text = text;
                },
                &seen),
            SHARDJIT_OK);
  log().warn("from {}", "C");
  EXPECT_EQ(seen.level, SHARDJIT_LOG_WARN);
  EXPECT_EQ(seen.text, "from C");
  ASSERT_EQ(shardjit_set_log_handler(nullptr, nullptr), SHARDJIT_OK);
  ::testing::internal::CaptureStderr();
  log().warn("back on stderr");
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("back on stderr"), std::string::npos);
  EXPECT_EQ(seen.text, "from C");
}

}  // namespace
}  // namespace shardjit
