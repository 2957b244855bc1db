// A plan: the steps of one op call as plain data: kernel launches on the caller's (compute)
// stream, collectives on the communicator's stream, and the events that order the two. Built
// once, when the op is built; the scheduler walks it on every call. Because it is data, the CPU
// tests read exactly what a call will enqueue.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace shardjit {

enum class StreamRole { kCompute, kComm };

struct PlanStep {
  enum class Kind { kLaunch, kCollective, kRecordEvent, kWaitEvent };
  Kind kind = Kind::kLaunch;
  std::string what;                       // for logs and tests: "linear_logp_fwd", ...
  StreamRole stream = StreamRole::kCompute;
  int action = -1;  // kLaunch, kCollective: the op's number for the work (see PlanActions)
  int event = -1;   // kRecordEvent, kWaitEvent: which of the plan's events
};

struct Plan {
  std::string name;
  std::vector<PlanStep> steps;
  int events = 0;

  // Appends a launch on the compute stream / a collective on the comm stream.
  Plan& launch(int action, std::string what);
  Plan& collective(int action, std::string what);
  // Records a new event on `from` and makes `to` wait for it: `to`'s later work runs after
  // `from`'s earlier work. Returns the event's index.
  int hand_off(StreamRole from, StreamRole to, const std::string& what);
};

const char* step_kind_name(PlanStep::Kind kind) noexcept;
const char* stream_role_name(StreamRole stream) noexcept;

// Throws Error(kInternal) naming the step when the plan breaks a rule the scheduler relies on:
// launches run on the compute stream and collectives on the comm stream; every event is
// recorded once, before any wait for it, and waited for on the other stream; the comm stream
// starts with a wait (it never runs ahead of the caller's work); and when the comm stream has
// work, the compute stream ends by waiting for its last record, so that the caller's stream is
// ordered after everything (which also closes a CUDA graph capture correctly).
void check_plan(const Plan& plan);

// One line per step ("3 collective comm all_gather partials"), for logs and test messages.
std::string describe(const Plan& plan);

// Steps of one kind.
std::size_t count_steps(const Plan& plan, PlanStep::Kind kind);

}  // namespace shardjit
