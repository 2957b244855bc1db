// One process per GPU for the multi-GPU tests: the launcher of tools/rank_processes (the one the
// benchmarks use too), and what the tests add to it: whether this machine can run a test on N
// GPUs, asked once in a forked child so that the test process stays without CUDA. Assertions
// belong in the test process; a rank's body throws on what it cannot do.
#pragma once

#include <string>

#include "tools/rank_processes/rank_processes.hpp"

namespace shardjit::testing {

using ranks::describe;
using ranks::RankContext;
using ranks::RankOutcome;
using ranks::RankReport;
using ranks::run_ranks;

// What a fresh process of this machine can do, asked in a forked child, once per test process.
struct MultiGpuProbe {
  int gpus = 0;
  bool nccl = false;
  std::string problem;  // the driver's or NCCL's message when something is missing
};
const MultiGpuProbe& probe_multi_gpu();

// Empty when this machine can run a test on `ranks` GPUs; else the reason to skip.
std::string multi_gpu_skip_reason(int ranks);

}  // namespace shardjit::testing
