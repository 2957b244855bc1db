// The rank-process harness of the multigpu tier, checked here on the CPU tier so that a
// multi-GPU failure is never the harness's: rank 0's NCCL unique id reaches every rank, reports
// come back through the pipes (also large ones, read concurrently), and a rank that throws,
// crashes or hangs is reported as such. Needs NCCL (for the id) but no GPU.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/nccl_library.hpp"
#include "shardjit/error.hpp"
#include "support/rank_processes.hpp"

namespace shardjit::testing {
namespace {

class RankProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nccl_available()) GTEST_SKIP() << "needs NCCL for the unique id";
  }
};

TEST_F(RankProcesses, EveryRankGetsTheSameUniqueIdAndReportsBack) {
  const auto outcomes = run_ranks(3, [](RankContext& ctx) {
    ctx.report.put_text("id", std::string(ctx.unique_id.data(), ctx.unique_id.size()));
    ctx.report.put_text("who", std::to_string(ctx.rank) + "/" + std::to_string(ctx.size));
    // Larger than a pipe's buffer, so that the test process must read the ranks concurrently.
    ctx.report.put("big", std::vector<float>(300000, static_cast<float>(ctx.rank)));
  });
  ASSERT_EQ(outcomes.size(), 3u);
  for (const RankOutcome& o : outcomes) {
    EXPECT_TRUE(o.finished) << describe(outcomes);
    EXPECT_TRUE(o.error.empty()) << o.error;
    EXPECT_EQ(o.report.text("who"), std::to_string(o.rank) + "/3");
    EXPECT_EQ(o.report.bytes("id"), outcomes[0].report.bytes("id"));
    const auto big = o.report.get<float>("big");
    ASSERT_EQ(big.size(), 300000u);
    EXPECT_EQ(big.back(), static_cast<float>(o.rank));
  }
}

TEST_F(RankProcesses, AThrowingRankReportsCodeAndMessage) {
  const auto outcomes = run_ranks(2, [](RankContext& ctx) {
    if (ctx.rank == 1) throw Error(ErrorCode::kCommError, "peer trouble");
  });
  EXPECT_TRUE(outcomes[1].finished);
  EXPECT_EQ(outcomes[1].error, "peer trouble");
  EXPECT_EQ(outcomes[1].error_code, static_cast<int>(ErrorCode::kCommError));
  EXPECT_TRUE(outcomes[0].error.empty());
}

TEST_F(RankProcesses, CrashesAndHangsAreReportedNotWaitedFor) {
  const auto outcomes = run_ranks(
      3,
      [](RankContext& ctx) {
        if (ctx.rank == 1) ::raise(SIGSEGV);
        if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::minutes(5));
      },
      std::chrono::seconds(3));
  EXPECT_TRUE(outcomes[0].finished) << describe(outcomes);
  EXPECT_FALSE(outcomes[1].finished);
  EXPECT_NE(outcomes[1].problem.find("signal"), std::string::npos) << outcomes[1].problem;
  EXPECT_FALSE(outcomes[2].finished);
  EXPECT_NE(outcomes[2].problem.find("killed"), std::string::npos) << outcomes[2].problem;
}

TEST(MultiGpuProbing, AnswersWithoutCudaInThisProcess) {
  const MultiGpuProbe& probe = probe_multi_gpu();
  EXPECT_GE(probe.gpus, 0);
  if (probe.gpus < 2) {
    EXPECT_FALSE(multi_gpu_skip_reason(2).empty());
  }
}

}  // namespace
}  // namespace shardjit::testing
