// One process per GPU, for the multi-GPU tests and benchmarks. The calling process never touches
// CUDA (a CUDA context does not survive fork): it forks the rank processes, rank 0 makes the NCCL
// unique id and sends it to the others through pipes, each rank runs the body on its GPU and
// sends a report (named blobs) back through a pipe, and the caller reads every rank's outcome.
// A body throws on what it cannot do; the exception's code and message travel back in its report.
//
// A static library of tools/ that the tests link too: it forks, which the runtime library never
// does, and it is the one implementation of the id protocol both tiers rely on.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "shardjit/communicator.hpp"
#include "tools/rank_processes/rank_report.hpp"

namespace shardjit::ranks {

struct RankContext {
  int rank = 0;
  int size = 1;
  CommUniqueId unique_id{};  // the same on every rank (zeros from run_alone)
  RankReport report;
};

struct RankOutcome {
  int rank = 0;
  bool finished = false;  // the process ran its body to the end (or to a caught exception)
  std::string problem;    // why not: crashed, killed at the deadline, ...
  // The exception the body threw, if any ("error" / "error_code" in the report).
  std::string error;
  int error_code = 0;  // an ErrorCode; -1 for an exception that is not a shardjit::Error
  RankReport report;
};

// Runs `body` in `size` forked processes (rank r uses GPU r) and returns each rank's outcome.
// A process not done within `deadline` is killed, and its outcome says so. Throws
// std::runtime_error when a pipe or a process cannot be made.
std::vector<RankOutcome> run_ranks(int size, const std::function<void(RankContext&)>& body,
                                   std::chrono::seconds deadline = std::chrono::seconds(120));

// Runs `body` in one forked process with no NCCL id (for asking what a fresh process can do
// while the caller stays without CUDA).
RankOutcome run_alone(const std::function<void(RankContext&)>& body,
                      std::chrono::seconds deadline = std::chrono::seconds(120));

// Whether every rank finished without an error.
bool all_ok(const std::vector<RankOutcome>& outcomes);

// A one-line-per-rank summary of outcomes for messages: each rank's problem or error, or "ok".
std::string describe(const std::vector<RankOutcome>& outcomes);

}  // namespace shardjit::ranks
