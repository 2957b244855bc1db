// What a tensor-parallel LinearLogp call enqueues, read from its plans, and the split arithmetic
// every rank must do alike.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/tp/plan.hpp"
#include "runtime/ops/linear_logp/combine.hpp"

namespace shardjit {
namespace {

using Kind = PlanStep::Kind;

// The index of the first step matching, or -1.
int find(const Plan& plan, Kind kind, StreamRole stream, int action = -1, int event = -1) {
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (s.kind == kind && s.stream == stream && (action < 0 || s.action == action) && (event < 0 || s.event == event)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

TEST(TpForwardPlan, OneAllGatherBetweenTheKernelsOrderedByEvents) {
  const Plan plan = tp_forward_plan();
  ASSERT_NO_THROW(check_plan(plan)) << describe(plan);
  EXPECT_EQ(count_steps(plan, Kind::kCollective), 1u) << describe(plan);
  EXPECT_EQ(count_steps(plan, Kind::kLaunch), 2u);

  const int fwd = find(plan, Kind::kLaunch, StreamRole::kCompute, kTpForwardKernel);
  const int gather = find(plan, Kind::kCollective, StreamRole::kComm, kTpAllGatherPartials);
  const int combine = find(plan, Kind::kLaunch, StreamRole::kCompute, kTpCombine);
  ASSERT_GE(fwd, 0);
  ASSERT_GE(gather, 0);
  ASSERT_GE(combine, 0);
  EXPECT_LT(fwd, gather);
  EXPECT_LT(gather, combine);

  // The comm stream waits for an event recorded on the compute stream after the forward kernel,
  // and the combine waits for an event recorded on the comm stream after the all-gather.
  const int ready = find(plan, Kind::kRecordEvent, StreamRole::kCompute);
  const int comm_waits = find(plan, Kind::kWaitEvent, StreamRole::kComm, -1, plan.steps[static_cast<std::size_t>(ready)].event);
  EXPECT_LT(fwd, ready);
  EXPECT_LT(ready, comm_waits);
  EXPECT_LT(comm_waits, gather);
  const int gathered = find(plan, Kind::kRecordEvent, StreamRole::kComm);
  const int compute_waits =
      find(plan, Kind::kWaitEvent, StreamRole::kCompute, -1, plan.steps[static_cast<std::size_t>(gathered)].event);
  EXPECT_LT(gather, gathered);
  EXPECT_LT(gathered, compute_waits);
  EXPECT_LT(compute_waits, combine);
  EXPECT_EQ(plan.events, 2);
}

TEST(TpForwardPlan, PeerPathIsTwoLaunchesAndNoCollective) {
  const Plan plan = tp_forward_peer_plan();
  EXPECT_NO_THROW(check_plan(plan)) << describe(plan);
  EXPECT_EQ(count_steps(plan, PlanStep::Kind::kCollective), 0u);
  EXPECT_EQ(plan.events, 0);
  ASSERT_EQ(plan.steps.size(), 2u) << describe(plan);
  EXPECT_EQ(plan.steps[0].action, kTpForwardKernel);
  EXPECT_EQ(plan.steps[1].action, kTpPeerCombine);
}

TEST(TpBackwardPlan, AllReducesGradHiddenOnTheCommStreamWhileGradWeightRuns) {
  const Plan plan = tp_backward_plan();
  ASSERT_NO_THROW(check_plan(plan)) << describe(plan);
  EXPECT_EQ(count_steps(plan, Kind::kCollective), 1u) << describe(plan);

  const int chunks = find(plan, Kind::kLaunch, StreamRole::kCompute, kTpBackwardChunks);
  const int reduce = find(plan, Kind::kCollective, StreamRole::kComm, kTpAllReduceGradHidden);
  const int weight = find(plan, Kind::kLaunch, StreamRole::kCompute, kTpBackwardLastWeight);
  const int round = find(plan, Kind::kLaunch, StreamRole::kCompute, kTpRoundGradHidden);
  ASSERT_GE(chunks, 0);
  ASSERT_GE(reduce, 0);
  ASSERT_GE(weight, 0);
  ASSERT_GE(round, 0);

  // The all-reduce starts after the grad_hidden terms are done ...
  const int done = find(plan, Kind::kRecordEvent, StreamRole::kCompute);
  const int comm_waits = find(plan, Kind::kWaitEvent, StreamRole::kComm, -1, plan.steps[static_cast<std::size_t>(done)].event);
  EXPECT_LT(chunks, done);
  EXPECT_LT(done, comm_waits);
  EXPECT_LT(comm_waits, reduce);
  // ... the last grad_weight is enqueued after that hand-off and before the compute stream waits
  // for the all-reduce, so the two overlap ...
  const int reduced = find(plan, Kind::kRecordEvent, StreamRole::kComm);
  const int compute_waits =
      find(plan, Kind::kWaitEvent, StreamRole::kCompute, -1, plan.steps[static_cast<std::size_t>(reduced)].event);
  EXPECT_LT(done, weight);
  EXPECT_LT(weight, compute_waits);
  // ... and grad_hidden is rounded only once the all-reduce is done.
  EXPECT_LT(reduce, reduced);
  EXPECT_LT(compute_waits, round);
}

TEST(TpSplits, TheCapKeepsEveryCombineWithinItsSourceLimit) {
  EXPECT_EQ(max_tp_splits(1), 128);
  EXPECT_EQ(max_tp_splits(2), 128);
  EXPECT_EQ(max_tp_splits(3), 128);
  EXPECT_EQ(max_tp_splits(8), 128);
  EXPECT_EQ(max_tp_splits(16), 64);
  EXPECT_EQ(max_tp_splits(1024), 1);
  for (int tp : {1, 2, 3, 5, 8, 12, 16, 100, 1024}) EXPECT_LE(tp * max_tp_splits(tp), kMaxCombineSources) << tp;
}

TpLayout two_ranks(std::int64_t v0, std::int64_t v1) {
  TpLayout layout;
  layout.tp = 2;
  layout.shards = {{0, v0, v0}, {v0, v1, v1}};
  layout.max_valid_local = std::max(v0, v1);
  layout.gpu = GpuShape{132, 60ll << 20};
  layout.split_tile = FwdTile{128, 256, 64, 3};
  return layout;
}

TEST(TpSplits, EveryRankChoosesTheSameCountFromTheWidestShard) {
  TpLayout layout = two_ranks(40000, 88256);
  for (std::int64_t n : {1, 64, 256, 1000, 4096, 16384}) {
    const int splits = tp_vocab_splits(layout, n, 8192).splits;
    EXPECT_EQ(splits, choose_vocab_splits(n, 8192, 88256, layout.split_tile, layout.gpu, 0.05, kMaxCombineSources,
                                          /*cuts_last_waves=*/false)
                          .splits)
        << n;
    layout.rank = 1;
    EXPECT_EQ(tp_vocab_splits(layout, n, 8192).splits, splits) << "the rank does not enter the choice";
    layout.rank = 0;
  }
}

TEST(TpSplits, LargeBatchesKeepTheAllGatherSmall) {
  // llama3-8b-16k over two ranks: the partials each rank sends stay a few MiB.
  const int splits = tp_vocab_splits(two_ranks(64128, 64128), 16384, 8192).splits;
  EXPECT_LE(static_cast<std::int64_t>(splits) * 16384 * 16, 4ll << 20) << splits << " splits";
}

TEST(TpSplits, ManyRanksAreCappedSoTheCombineFits) {
  TpLayout layout = two_ranks(64128, 64128);
  layout.tp = 16;
  for (std::int64_t n : {1, 256, 4096, 16384}) EXPECT_LE(tp_vocab_splits(layout, n, 8192).splits, 64) << n;
}

TEST(TpSplits, ThePartialsBufferFitsEveryCallUpToItsRows) {
  const TpLayout layout = two_ranks(64128, 64128);
  const std::int64_t rows = tp_partial_rows(layout, 16384, 8192);
  for (std::int64_t n = 1; n <= 16384; n += 97) {
    EXPECT_LE(2 * tp_vocab_splits(layout, n, 8192).splits * n, rows) << n;
  }
}

}  // namespace
}  // namespace shardjit
