#include "runtime/sched/scheduler.hpp"

#include <utility>

#include "runtime/driver/cuda_driver.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

Scheduler::Scheduler(const DeviceContext& device, Plan plan, CUstream comm_stream)
    : plan_(std::move(plan)), comm_(comm_stream) {
  check_plan(plan_);
  for (const PlanStep& step : plan_.steps) {
    if (step.stream == StreamRole::kComm && comm_ == nullptr) {
      throw Error(ErrorCode::kInternal, "plan '" + plan_.name + "' has comm steps but no comm stream");
    }
  }
  events_.reserve(static_cast<std::size_t>(plan_.events));
  for (int i = 0; i < plan_.events; ++i) events_.emplace_back(device);
}

void Scheduler::run(PlanActions& actions, CUstream compute) const {
  for (const PlanStep& step : plan_.steps) {
    const CUstream stream = step.stream == StreamRole::kComm ? comm_ : compute;
    switch (step.kind) {
      case PlanStep::Kind::kLaunch:
        actions.launch(step.action, stream);
        break;
      case PlanStep::Kind::kCollective:
        actions.collective(step.action, stream);
        break;
      case PlanStep::Kind::kRecordEvent:
        SHARDJIT_CU(cuEventRecord(events_[static_cast<std::size_t>(step.event)].get(), stream));
        break;
      case PlanStep::Kind::kWaitEvent:
        SHARDJIT_CU(cuStreamWaitEvent(stream, events_[static_cast<std::size_t>(step.event)].get(), 0));
        break;
    }
  }
}

}  // namespace shardjit
