// Every wait on a peer is bounded: a peer that never joins, or that dies before a collective,
// is a kCommError on the others within the communicator's timeout, never a hang; so is a
// caller's own wait on a stream whose NCCL collective waits for a dead peer (the watchdog).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <string>

#include "collective_problem.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "tp_problem.hpp"

namespace shardjit {
namespace {

using namespace testing;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kShortTimeout{3000};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(Communicator, TwoRanksJoinAndAgreeOnRankAndSize) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    ctx.report.put_text("rank", std::to_string(comm.rank()));
    ctx.report.put_text("size", std::to_string(comm.size()));
    ctx.report.put_text("stream", comm.stream() != nullptr ? "yes" : "no");
  });
  expect_all_ok(outcomes);
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.report.text("rank"), std::to_string(o.rank));
    EXPECT_EQ(o.report.text("size"), "2");
    EXPECT_EQ(o.report.text("stream"), "yes");
  }
}

TEST(Communicator, APeerThatNeverJoinsIsATimeout) {
  SHARDJIT_REQUIRE_GPUS(1);
  const auto outcomes = run_ranks(2, [](RankContext& ctx) {
    if (ctx.rank != 0) return;  // rank 1 gets the id and never joins
    Runtime runtime;
    const auto start = Clock::now();
    try {
      Communicator::create(runtime, 0, 0, ctx.size, ctx.unique_id, comm_options(kShortTimeout));
    } catch (...) {
      ctx.report.put_text("seconds", std::to_string(seconds_since(start)));
      throw;
    }
  });
  ASSERT_TRUE(outcomes[0].finished) << describe(outcomes);
  EXPECT_EQ(outcomes[0].error_code, static_cast<int>(ErrorCode::kCommError)) << describe(outcomes);
  EXPECT_NE(outcomes[0].error.find("did not complete within 3000 ms"), std::string::npos) << outcomes[0].error;
  EXPECT_LT(std::stod(outcomes[0].report.text("seconds")), 30.0) << "the wait is bounded";
  std::printf("[ message  ] %s\n", outcomes[0].error.c_str());
}

TEST(Communicator, APeerThatDiesBeforeTheCollectiveIsATimeoutOnTheOthers) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    // A long bound while the op is built (a first-time compile on one rank keeps the other
    // waiting), a short one after.
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    RankTensors tensors(p, shard, targets, device);
    LinearLogp op(runtime, config_for(p, shard, ctx.rank), comm);
    comm.set_timeout(kShortTimeout);
    if (ctx.rank == 1) ::_exit(0);  // gone before the forward's all-gather, without a word
    const auto start = Clock::now();
    try {
      op.forward(tensors.inputs(), tensors.outputs(), nullptr);
      op.check(nullptr);
    } catch (...) {
      ctx.report.put_text("seconds", std::to_string(seconds_since(start)));
      ctx.report.put_text("aborted", comm.aborted() ? "yes" : "no");
      throw;
    }
  });
  ASSERT_TRUE(outcomes[0].finished) << describe(outcomes);
  EXPECT_EQ(outcomes[0].error_code, static_cast<int>(ErrorCode::kCommError)) << describe(outcomes);
  EXPECT_LT(std::stod(outcomes[0].report.text("seconds")), 30.0) << "the wait is bounded";
  EXPECT_EQ(outcomes[0].report.text("aborted"), "yes");
  std::printf("[ message  ] %s\n", outcomes[0].error.c_str());
}

// Rank 1 builds an NCCL-path ReduceScatter and dies; rank 0 runs it and waits on its stream with
// cuStreamSynchronize, not check(). The watchdog aborts the communicator after the timeout, which
// ends NCCL's kernel, so the wait returns; check() then names the collective that timed out.
TEST(Communicator, TheWatchdogEndsACallersOwnWaitOnAStreamWhosePeerDied) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    reduce_scatter_without_its_peer(ctx, CollectivePath::kNccl, 9,
                                    [&](Communicator& comm, ReduceScatter& op, const DeviceContext& device,
                                        DeviceArray&) {
      const auto start = Clock::now();
      {
        ScopedContext scope(device);
        const CUresult rc = driver().cuStreamSynchronize(nullptr);
        ctx.report.put_text("sync", rc == CUDA_SUCCESS ? "ok" : "error " + std::to_string(static_cast<int>(rc)));
      }
      ctx.report.put_text("seconds", std::to_string(seconds_since(start)));
      ctx.report.put_text("aborted", comm.aborted() ? "yes" : "no");
      ctx.report.put_text("check", check_outcome(op));
    });
  }, std::chrono::seconds(120));
  ASSERT_EQ(outcomes.size(), 2u);
  const RankOutcome& r0 = outcomes[0];
  ASSERT_TRUE(r0.finished && r0.error.empty()) << describe(outcomes);
  EXPECT_LT(std::stod(r0.report.text("seconds")), 30.0) << "the caller's wait is bounded";
  EXPECT_GE(std::stod(r0.report.text("seconds")), 2.5) << "not before the timeout";
  EXPECT_EQ(r0.report.text("aborted"), "yes");
  const std::string check = r0.report.text("check");
  EXPECT_TRUE(is_comm_error(check)) << check;
  EXPECT_NE(check.find("ncclReduceScatter (rank 0 of 2) did not finish within 3000 ms"), std::string::npos) << check;
  EXPECT_NE(check.find("watchdog"), std::string::npos) << check;
  std::printf("[ message  ] sync %s after %s s; %s\n", r0.report.text("sync").c_str(), r0.report.text("seconds").c_str(),
              check.c_str());
}

}  // namespace
}  // namespace shardjit
