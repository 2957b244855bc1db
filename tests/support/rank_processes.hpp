// One process per GPU for the multi-GPU tests. The test process itself never touches CUDA (a
// CUDA context does not survive fork): it forks the rank processes, rank 0 makes the NCCL unique
// id and sends it to the others through pipes, each rank runs the test's body on its GPU and
// sends a report (named blobs) back through a pipe, and the test process checks the reports.
// Assertions belong in the test process; a rank's body throws on what it cannot do, and the
// exception's code and message travel back in its report.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shardjit/communicator.hpp"

namespace shardjit::testing {

// Named byte blobs a rank sends back.
class RankReport {
 public:
  void put_bytes(const std::string& key, const void* data, std::size_t bytes);
  template <class T>
  void put(const std::string& key, const std::vector<T>& values) {
    put_bytes(key, values.data(), values.size() * sizeof(T));
  }
  void put_text(const std::string& key, const std::string& text) { put_bytes(key, text.data(), text.size()); }

  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  const std::string& bytes(const std::string& key) const;  // throws std::out_of_range naming the key
  template <class T>
  std::vector<T> get(const std::string& key) const {
    const std::string& raw = bytes(key);
    std::vector<T> values(raw.size() / sizeof(T));
    std::memcpy(values.data(), raw.data(), values.size() * sizeof(T));
    return values;
  }
  std::string text(const std::string& key) const { return has(key) ? bytes(key) : std::string(); }

  std::string serialize() const;
  static RankReport parse(const std::string& wire);

 private:
  std::map<std::string, std::string> entries_;
};

struct RankContext {
  int rank = 0;
  int size = 1;
  CommUniqueId unique_id{};
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
// A process not done within `deadline` is killed, and its outcome says so.
std::vector<RankOutcome> run_ranks(int size, const std::function<void(RankContext&)>& body,
                                   std::chrono::seconds deadline = std::chrono::seconds(120));

// What a fresh process of this machine can do, asked in a forked child (so that this process
// stays without CUDA), once per test process.
struct MultiGpuProbe {
  int gpus = 0;
  bool nccl = false;
  std::string problem;  // the driver's or NCCL's message when something is missing
};
const MultiGpuProbe& probe_multi_gpu();

// Empty when this machine can run a test on `ranks` GPUs; else the reason to skip.
std::string multi_gpu_skip_reason(int ranks);

// A one-line summary of outcomes for test messages: each rank's problem or error.
std::string describe(const std::vector<RankOutcome>& outcomes);

}  // namespace shardjit::testing
