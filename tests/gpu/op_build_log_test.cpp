// An op that has to compile says so once, before it starts: what it builds, how many of its
// kernels compile, and the `shardjit prewarm` command that would have built them ahead. An op
// whose kernels are in memory or on disk says nothing.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/logging.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

// The lines the "shardjit" logger writes while it lives, message text only.
class BuildLog {
 public:
  BuildLog() : saved_level_(log().level()), sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    sink_->set_pattern("%v");
    log().sinks().push_back(sink_);
  }
  ~BuildLog() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    log().set_level(saved_level_);
  }
  BuildLog(const BuildLog&) = delete;
  BuildLog& operator=(const BuildLog&) = delete;

  // The lines that announce an op's compile.
  std::vector<std::string> announcements() const {
    std::vector<std::string> found;
    std::istringstream lines(stream_.str());
    for (std::string line; std::getline(lines, line);) {
      if (line.find(" kernels for ") != std::string::npos && line.find("shardjit prewarm") != std::string::npos) {
        found.push_back(line);
      }
    }
    return found;
  }
  int compiles() const {
    int count = 0;
    std::istringstream lines(stream_.str());
    for (std::string line; std::getline(lines, line);) count += line.rfind("compiled ", 0) == 0;
    return count;
  }

 private:
  spdlog::level::level_enum saved_level_;
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

LinearLogpConfig training_config() {
  LinearLogpConfig config;
  config.hidden = 256;
  config.vocab_local = 1000;
  config.dtype = DType::kBF16;
  config.want_backward = true;
  return config;
}

TEST(OpBuildLog, AnOpThatCompilesSaysOnceWhatAndHowManyAndTheCommandThatBuildsThemAhead) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  testing::TempDir dir;
  BuildLog build_log;  // before the Runtime, whose log level it restores at the end
  RuntimeOptions options;
  options.cache_dir = (dir.path() / "cache").string();  // empty: every kernel not built with the library compiles
  options.log_level = "info";
  // The portable loop, whose forward and dZ kernels are specialized for the shape: on the Hopper
  // loop every kernel of a 16-bit op may come with the library, and nothing would compile.
  options.hopper_path = false;
  {
    Runtime runtime(options);
    LinearLogp op(runtime, training_config());
    const std::vector<std::string> lines = build_log.announcements();
    ASSERT_EQ(lines.size(), 1u) << "expected one announcement";
    const std::string& line = lines[0];
    EXPECT_NE(line.find("LinearLogp(hidden=256, vocab_local=1000, bf16, with backward)"), std::string::npos) << line;
    // The forward and dZ kernels at least; the GEMMs, scale and combine too where the library was
    // built without them.
    EXPECT_GE(build_log.compiles(), 2);
    std::smatch counts;
    ASSERT_TRUE(std::regex_search(line, counts, std::regex(R"(compiles (\d+) of its (\d+) kernels)"))) << line;
    EXPECT_EQ(std::stoi(counts[1].str()), build_log.compiles()) << line;
    EXPECT_GT(std::stoi(counts[2].str()), 6) << "the GEMMs, scale and combine kernels are the op's too: " << line;
    EXPECT_NE(line.find("shardjit prewarm --hidden 256 --vocab 1000"), std::string::npos) << line;
    EXPECT_NE(line.find("--backward"), std::string::npos) << line;
    EXPECT_NE(line.find("--cache-dir " + *options.cache_dir + "`"), std::string::npos) << line;

    LinearLogp again(runtime, training_config());  // all in memory now
    EXPECT_EQ(build_log.announcements().size(), 1u);
  }
  Runtime fresh(options);  // a new process would find them all on disk
  const int compiled_before = build_log.compiles();
  LinearLogp from_disk(fresh, training_config());
  EXPECT_EQ(build_log.announcements().size(), 1u);
  EXPECT_EQ(build_log.compiles(), compiled_before);
}

}  // namespace
}  // namespace shardjit
