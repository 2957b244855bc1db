// The plans of the cross-GPU ops: the peer path is one kernel and nothing else (no comm-stream
// work, no events); the NCCL paths have exactly one collective, on the comm stream, between
// hand-offs; every plan passes the scheduler's rules.
#include <gtest/gtest.h>

#include "runtime/ops/collective/peer_collective_plan.hpp"

namespace shardjit {
namespace {

TEST(PeerCollectivePlan, PeerPathsAreOneKernel) {
  for (const Plan& plan : {reduce_scatter_plan(true), moe_combine_plan(true)}) {
    EXPECT_NO_THROW(check_plan(plan)) << describe(plan);
    ASSERT_EQ(plan.steps.size(), 1u) << describe(plan);
    EXPECT_EQ(plan.steps[0].kind, PlanStep::Kind::kLaunch);
    EXPECT_EQ(plan.steps[0].action, kPeerKernel);
    EXPECT_EQ(plan.events, 0);
  }
}

TEST(PeerCollectivePlan, NcclReduceScatterIsOneCollectiveBetweenHandOffs) {
  const Plan plan = reduce_scatter_plan(false);
  EXPECT_NO_THROW(check_plan(plan)) << describe(plan);
  EXPECT_EQ(count_steps(plan, PlanStep::Kind::kCollective), 1u);
  EXPECT_EQ(count_steps(plan, PlanStep::Kind::kLaunch), 0u);
  ASSERT_EQ(plan.steps.size(), 5u) << describe(plan);
  EXPECT_EQ(plan.steps[2].action, kNcclReduceScatter);
  EXPECT_EQ(plan.steps[2].stream, StreamRole::kComm);
}

TEST(PeerCollectivePlan, NcclMoeCombineStagesGathersThenCombines) {
  const Plan plan = moe_combine_plan(false);
  EXPECT_NO_THROW(check_plan(plan)) << describe(plan);
  std::vector<int> work;
  for (const PlanStep& step : plan.steps) {
    if (step.kind == PlanStep::Kind::kLaunch || step.kind == PlanStep::Kind::kCollective) work.push_back(step.action);
  }
  EXPECT_EQ(work, (std::vector<int>{kStageRows, kNcclAllGatherRows, kLocalCombine})) << describe(plan);
  EXPECT_EQ(count_steps(plan, PlanStep::Kind::kCollective), 1u);
}

}  // namespace
}  // namespace shardjit
