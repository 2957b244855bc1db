// Several `shardjit prewarm` processes on one cache folder at once, as when every rank of a job
// prewarms on start: each kernel is compiled by exactly one of them, the others load it, and the
// cache is left complete and clean.
#include <memory>
#include <regex>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"
#include "tests/cli/tiny_model.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kProcesses = 3;

struct Counts {
  std::size_t total = 0, compiled = 0, cached = 0, failed = 0;
};

Counts parse_summary(const std::string& out) {
  static const std::regex summary(R"(prewarm: (\d+) kernels: (\d+) compiled, 0 prebuilt, (\d+) already cached, (\d+) failed)");
  std::smatch match;
  if (!std::regex_search(out, match, summary)) {
    ADD_FAILURE() << "no summary in: " << out;
    return {};
  }
  auto number = [&](int i) { return static_cast<std::size_t>(std::stoul(match[i].str())); };
  return {number(1), number(2), number(3), number(4)};
}

TEST(CliPrewarmConcurrency, EachKernelIsCompiledOnceAcrossProcesses) {
  TempDir temp;
  const fs::path cache = temp.path() / "cache";
  const std::size_t n = tiny_kernel_count();

  std::vector<std::unique_ptr<CliProcess>> processes;
  for (int i = 0; i < kProcesses; ++i) {
    processes.push_back(std::make_unique<CliProcess>(tiny_prewarm_args(cache), temp.path()));
  }
  std::size_t compiled = 0;
  for (auto& process : processes) {
    CliResult result = process->wait();
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    Counts counts = parse_summary(result.out);
    EXPECT_EQ(counts.total, n);
    EXPECT_EQ(counts.compiled + counts.cached, n) << result.out;
    EXPECT_EQ(counts.failed, 0u);
    compiled += counts.compiled;
  }
  EXPECT_EQ(compiled, n) << "every key must be compiled by exactly one process";

  EXPECT_EQ(cache_entries(cache).size(), n);
  EXPECT_TRUE(cache_temp_files(cache).empty());
  CliResult verify = run_cli({"--cache-dir", cache.string(), "verify"}, temp.path());
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find(std::to_string(n) + " ok, 0 bad"), std::string::npos) << verify.out;
}

}  // namespace
}  // namespace shardjit::testing
