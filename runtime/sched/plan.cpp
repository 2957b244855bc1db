#include "runtime/sched/plan.hpp"

#include <utility>

#include "shardjit/error.hpp"

namespace shardjit {

Plan& Plan::launch(int action, std::string what) {
  steps.push_back({PlanStep::Kind::kLaunch, std::move(what), StreamRole::kCompute, action, -1});
  return *this;
}

Plan& Plan::collective(int action, std::string what) {
  steps.push_back({PlanStep::Kind::kCollective, std::move(what), StreamRole::kComm, action, -1});
  return *this;
}

int Plan::hand_off(StreamRole from, StreamRole to, const std::string& what) {
  const int event = events++;
  steps.push_back({PlanStep::Kind::kRecordEvent, what, from, -1, event});
  steps.push_back({PlanStep::Kind::kWaitEvent, what, to, -1, event});
  return event;
}

const char* step_kind_name(PlanStep::Kind kind) noexcept {
  switch (kind) {
    case PlanStep::Kind::kLaunch: return "launch";
    case PlanStep::Kind::kCollective: return "collective";
    case PlanStep::Kind::kRecordEvent: return "record";
    case PlanStep::Kind::kWaitEvent: return "wait";
  }
  return "?";
}

const char* stream_role_name(StreamRole stream) noexcept {
  return stream == StreamRole::kCompute ? "compute" : "comm";
}

std::string describe(const Plan& plan) {
  std::string text = plan.name + ":\n";
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    text += "  " + std::to_string(i) + " " + step_kind_name(step.kind) + " " + stream_role_name(step.stream);
    if (step.event >= 0) text += " event " + std::to_string(step.event);
    text += " " + step.what + "\n";
  }
  return text;
}

std::size_t count_steps(const Plan& plan, PlanStep::Kind kind) {
  std::size_t count = 0;
  for (const PlanStep& step : plan.steps) count += step.kind == kind ? 1 : 0;
  return count;
}

void check_plan(const Plan& plan) {
  auto bad = [&](std::size_t index, const std::string& rule) {
    throw Error(ErrorCode::kInternal, "plan '" + plan.name + "', step " + std::to_string(index) + ": " + rule +
                                          "\n" + describe(plan));
  };
  std::vector<int> recorded_on(static_cast<std::size_t>(plan.events), -1);  // -1: not yet; else StreamRole
  bool comm_started = false;
  int last_comm_record = -1;
  bool comm_joined = true;  // no comm work yet: nothing to join
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    const bool on_comm = step.stream == StreamRole::kComm;
    if (on_comm && !comm_started && step.kind != PlanStep::Kind::kWaitEvent) {
      bad(i, "the comm stream must start by waiting for the compute stream");
    }
    if (on_comm) comm_started = true;
    switch (step.kind) {
      case PlanStep::Kind::kLaunch:
        if (on_comm) bad(i, "kernel launches run on the compute stream");
        if (step.action < 0) bad(i, "a launch needs an action");
        break;
      case PlanStep::Kind::kCollective:
        if (!on_comm) bad(i, "collectives run on the comm stream");
        if (step.action < 0) bad(i, "a collective needs an action");
        comm_joined = false;
        break;
      case PlanStep::Kind::kRecordEvent: {
        if (step.event < 0 || step.event >= plan.events) bad(i, "event index out of range");
        int& where = recorded_on[static_cast<std::size_t>(step.event)];
        if (where != -1) bad(i, "an event is recorded once per call");
        where = static_cast<int>(step.stream);
        if (on_comm) {
          last_comm_record = step.event;
          comm_joined = false;
        }
        break;
      }
      case PlanStep::Kind::kWaitEvent: {
        if (step.event < 0 || step.event >= plan.events) bad(i, "event index out of range");
        const int where = recorded_on[static_cast<std::size_t>(step.event)];
        if (where == -1) bad(i, "waits for an event not recorded before it");
        if (where == static_cast<int>(step.stream)) bad(i, "waits for an event of its own stream");
        if (!on_comm && step.event == last_comm_record) comm_joined = true;
        break;
      }
    }
  }
  if (!comm_joined) {
    bad(plan.steps.size() - 1, "the compute stream must end by waiting for the comm stream's last record");
  }
}

}  // namespace shardjit
