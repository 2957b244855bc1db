// One process per GPU for the multi-GPU benchmarks: forked before any CUDA call (a CUDA
// context does not survive fork); rank 0 makes the NCCL unique id and sends it to the others
// through pipes. Each rank prints its own JSON lines.
#pragma once

#include <functional>

#include "shardjit/communicator.hpp"

namespace shardjit::bench {

// Runs body(rank, unique_id) in `ranks` forked processes (rank r on GPU r) and waits for them.
// A body's exception is printed on stderr and makes its process exit 1. Returns 0 when every
// rank exited 0, else 1.
int run_rank_processes(int ranks, const std::function<void(int rank, const CommUniqueId& id)>& body);

}  // namespace shardjit::bench
