// The scheduler: enqueues a plan's steps, in order, on the caller's stream and the
// communicator's stream, with events created once, when the op is built. Nothing here allocates
// or waits on the host, so a call can be captured into a CUDA graph.
#pragma once

#include <cuda.h>

#include <vector>

#include "runtime/driver/device.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/sched/plan.hpp"

namespace shardjit {

// What an op does for the work steps of its plan; the scheduler does the events.
class PlanActions {
 public:
  virtual ~PlanActions() = default;
  virtual void launch(int action, CUstream stream) = 0;
  virtual void collective(int action, CUstream stream) = 0;
};

class Scheduler {
 public:
  // Checks the plan (check_plan) and creates its events on `device`. `comm_stream` is the
  // communicator's stream (null for a plan without comm steps).
  Scheduler(const DeviceContext& device, Plan plan, CUstream comm_stream);

  const Plan& plan() const { return plan_; }

  // Enqueues every step; `compute` is the caller's stream. The events are reused call after
  // call: a wait always refers to the record made earlier in the same call.
  void run(PlanActions& actions, CUstream compute) const;

 private:
  Plan plan_;
  CUstream comm_ = nullptr;
  std::vector<OwnedEvent> events_;
};

}  // namespace shardjit
