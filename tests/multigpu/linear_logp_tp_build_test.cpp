// Building a TP LinearLogp is collective: a bad layout is the same error on every rank and
// leaves the communicator usable; a built op can be captured into a CUDA graph and replayed.
#include <gtest/gtest.h>

#include <cuda.h>

#include <string>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "tp_problem.hpp"

namespace shardjit {
namespace {

using namespace testing;

// Rank 1 builds with `change` applied to its config; every rank reports the error it got, then
// both build the right op on the same communicator and run it.
template <class Change>
std::vector<RankOutcome> build_with_rank1(Change change) {
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  return run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    LinearLogpConfig config = config_for(p, shard, ctx.rank);
    if (ctx.rank == 1) change(config);
    try {
      LinearLogp bad(runtime, config, comm);
      ctx.report.put_text("built", "yes");
    } catch (const Error& e) {
      ctx.report.put_text("build_error", e.what());
      ctx.report.put_text("build_code", std::to_string(static_cast<int>(e.code())));
    }
    // The ranks are still in step: a correct op builds and runs.
    RankTensors tensors(p, shard, targets, device);
    LinearLogp op(runtime, config_for(p, shard, ctx.rank), comm);
    op.forward(tensors.inputs(), tensors.outputs(), nullptr);
    op.check(nullptr);
    tensors.report(ctx.report, "tp_");
  });
}

void expect_same_rejection(const std::vector<RankOutcome>& outcomes, const std::string& needle) {
  expect_all_ok(outcomes);
  if (::testing::Test::HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    EXPECT_FALSE(o.report.has("built")) << "rank " << o.rank << " built an op from a bad layout";
    EXPECT_EQ(o.report.text("build_code"), std::to_string(static_cast<int>(ErrorCode::kInvalidArgument)));
    EXPECT_NE(o.report.text("build_error").find(needle), std::string::npos) << o.report.text("build_error");
    EXPECT_EQ(o.report.text("build_error"), outcomes[0].report.text("build_error")) << "rank " << o.rank;
    EXPECT_EQ(o.report.bytes("tp_lse"), outcomes[0].report.bytes("tp_lse")) << "the op built after it runs";
  }
  std::printf("[ message  ] %s\n", outcomes[0].report.text("build_error").c_str());
}

TEST(TpBuild, AMismatchedHiddenSizeIsRejectedOnEveryRankWithOneMessage) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_same_rejection(build_with_rank1([](LinearLogpConfig& c) { c.hidden = 128; }),
                        "hidden differs across ranks (rank 0: 256, rank 1: 128)");
}

TEST(TpBuild, AGapBetweenShardsIsRejectedOnEveryRankWithOneMessage) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_same_rejection(build_with_rank1([](LinearLogpConfig& c) {
                          c.vocab_start += 10;
                          c.vocab_local -= 10;
                        }),
                        "ids [500, 510) are on no rank");
}

TEST(TpBuild, ALocallyInvalidConfigIsReportedOnEveryRank) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_same_rejection(build_with_rank1([](LinearLogpConfig& c) { c.temperature = -1.0f; }),
                        "rank 1: LinearLogp config: temperature");
}

// Driver calls of the test itself, checked.
#define TEST_CU(call) ::shardjit::check_cu(::shardjit::driver().call, #call)

TEST(TpGraph, CaptureAndReplayGiveTheEagerResult) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    TpRank rank(ctx, p, targets);
    auto& [runtime, comm, device, shard, tensors] = rank;
    LinearLogpConfig config = config_for(p, shard, ctx.rank);
    config.max_rows = p.n;  // nothing grows during capture
    LinearLogp op(runtime, config, comm);
    OwnedStream stream(device);
    ScopedContext scope(device);

    auto eager = [&](const std::string& key) {
      tensors.poison();
      op.forward(tensors.inputs(), tensors.outputs(), stream.get());
      op.check(stream.get());
      tensors.report(ctx.report, key);
    };
    eager("eager1_");

    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    TEST_CU(cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    op.forward(tensors.inputs(), tensors.outputs(), stream.get());
    TEST_CU(cuStreamEndCapture(stream.get(), &graph));
    TEST_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));

    auto replay = [&](const std::string& key) {
      tensors.poison();
      TEST_CU(cuGraphLaunch(exec, stream.get()));
      op.check(stream.get());
      tensors.report(ctx.report, key);
    };
    replay("replay1_");
    // New hidden states in the same buffer: the replay reads them.
    const auto x2 = random_bytes(p.seed + 100, 0, p.n * p.hidden, 1.0f, p.dtype);
    tensors.hidden.upload(x2.data(), x2.size());
    replay("replay2_");
    eager("eager2_");
    TEST_CU(cuGraphExecDestroy(exec));
    TEST_CU(cuGraphDestroy(graph));
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    for (const char* key : {"logp", "lse", "entropy"}) {
      EXPECT_EQ(o.report.bytes(std::string("replay1_") + key), o.report.bytes(std::string("eager1_") + key))
          << "rank " << o.rank << " " << key;
      EXPECT_EQ(o.report.bytes(std::string("replay2_") + key), o.report.bytes(std::string("eager2_") + key))
          << "rank " << o.rank << " " << key;
      EXPECT_EQ(o.report.bytes(std::string("replay2_") + key), outcomes[0].report.bytes(std::string("replay2_") + key))
          << "rank " << o.rank << " " << key;
    }
    EXPECT_NE(o.report.bytes("eager1_lse"), o.report.bytes("eager2_lse")) << "the second input differs";
  }
}

}  // namespace
}  // namespace shardjit
