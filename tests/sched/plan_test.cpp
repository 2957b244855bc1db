// Plans are plain data with rules the scheduler relies on; a plan that breaks one is a bug and
// is refused when the op is built.
#include <gtest/gtest.h>

#include <string>

#include "runtime/sched/plan.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

using Kind = PlanStep::Kind;

// A well-formed plan with one collective between two launches.
Plan fork_join() {
  Plan plan;
  plan.name = "fork-join";
  plan.launch(0, "produce");
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "produced");
  plan.collective(1, "exchange");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "exchanged");
  plan.launch(2, "consume");
  return plan;
}

void expect_refused(const Plan& plan, const std::string& rule) {
  try {
    check_plan(plan);
    FAIL() << "expected the plan to be refused for: " << rule << "\n" << describe(plan);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
  }
}

TEST(Plan, HandOffRecordsOnOneStreamAndWaitsOnTheOther) {
  const Plan plan = fork_join();
  ASSERT_EQ(plan.steps.size(), 7u);
  EXPECT_EQ(plan.events, 2);
  EXPECT_EQ(plan.steps[1].kind, Kind::kRecordEvent);
  EXPECT_EQ(plan.steps[1].stream, StreamRole::kCompute);
  EXPECT_EQ(plan.steps[2].kind, Kind::kWaitEvent);
  EXPECT_EQ(plan.steps[2].stream, StreamRole::kComm);
  EXPECT_EQ(plan.steps[1].event, plan.steps[2].event);
  EXPECT_EQ(plan.steps[3].kind, Kind::kCollective);
  EXPECT_EQ(plan.steps[3].stream, StreamRole::kComm);
  EXPECT_EQ(count_steps(plan, Kind::kCollective), 1u);
  EXPECT_EQ(count_steps(plan, Kind::kLaunch), 2u);
  EXPECT_NO_THROW(check_plan(plan));
}

TEST(Plan, ALocalPlanNeedsNoEvents) {
  Plan plan;
  plan.name = "local";
  plan.launch(0, "a").launch(1, "b");
  EXPECT_NO_THROW(check_plan(plan));
}

TEST(Plan, DescribeListsEveryStep) {
  const std::string text = describe(fork_join());
  EXPECT_NE(text.find("3 collective comm exchange"), std::string::npos) << text;
  EXPECT_NE(text.find("1 record compute event 0 produced"), std::string::npos) << text;
}

TEST(Plan, CollectivesRunOnTheCommStreamOnly) {
  Plan plan = fork_join();
  plan.steps[3].stream = StreamRole::kCompute;
  expect_refused(plan, "collectives run on the comm stream");
}

TEST(Plan, LaunchesRunOnTheComputeStreamOnly) {
  Plan plan = fork_join();
  plan.steps.insert(plan.steps.begin() + 3, PlanStep{Kind::kLaunch, "misplaced", StreamRole::kComm, 9, -1});
  expect_refused(plan, "kernel launches run on the compute stream");
}

TEST(Plan, TheCommStreamNeverRunsAhead) {
  Plan plan;
  plan.name = "ahead";
  plan.collective(1, "too early");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "done");
  expect_refused(plan, "must start by waiting for the compute stream");
}

TEST(Plan, TheComputeStreamJoinsTheCommStream) {
  Plan plan;
  plan.name = "no join";
  plan.launch(0, "produce");
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "produced");
  plan.collective(1, "exchange");
  expect_refused(plan, "must end by waiting for the comm stream's last record");
}

TEST(Plan, AWaitNeedsAnEarlierRecordOfTheOtherStream) {
  Plan plan = fork_join();
  std::swap(plan.steps[1], plan.steps[2]);  // wait before record
  expect_refused(plan, "waits for an event not recorded before it");

  Plan own = fork_join();
  own.steps[2].stream = StreamRole::kCompute;  // the compute stream waits for itself
  expect_refused(own, "waits for an event of its own stream");
}

TEST(Plan, AnEventIsRecordedOncePerCall) {
  Plan plan = fork_join();
  plan.steps.push_back(plan.steps[1]);
  expect_refused(plan, "recorded once per call");
}

}  // namespace
}  // namespace shardjit
