// `shardjit-bench reduce-scatter`: ReduceScatter on every GPU of the node (one process per GPU)
// against ncclReduceScatter over the same ranks, in the same processes. Each rank prints one JSON
// object per case: the op with the automatic path (peer memory within a node), the op's NCCL
// path, raw NCCL on a blocking communicator (the baseline) and on the op's non-blocking one,
// and the throughput ratio NCCL time / peer time; then the op and the baseline again, replayed
// from CUDA graphs of 8 calls (the GPU's time per call without host launch work: the latency
// ratio), and in bursts of 32 calls enqueued back to back (GPU time per call, and the host's
// time per call to enqueue).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_timer.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit::bench {

struct ReduceScatterCase {
  std::string name;
  std::int64_t tokens = 0;  // T: rows of every rank's input, split evenly over the ranks
  std::int64_t hidden = 0;
  DType dtype = DType::kBF16;
};

// The "reduce_scatter" cases of shapes.json.
std::vector<ReduceScatterCase> load_reduce_scatter_cases(const std::string& shapes_path);

// Forks one process per GPU (`ranks` of them) and runs every case. Returns main's exit status.
int run_reduce_scatter_cases(const std::vector<ReduceScatterCase>& cases, int ranks, const TimingOptions& timing);

}  // namespace shardjit::bench
