// The multi-GPU benchmarks' use of the rank-process launcher (tools/rank_processes): each rank
// prints its own JSON lines on stdout; what went wrong on a rank goes to stderr.
#pragma once

#include <functional>

#include "shardjit/communicator.hpp"

namespace shardjit::bench {

// Runs body(rank, unique_id) in `ranks` forked processes (rank r on GPU r) and waits for them.
// Each rank's exception or crash is printed on stderr. Returns 0 when every rank finished
// without an error, else 1.
int run_rank_processes(int ranks, const std::function<void(int rank, const CommUniqueId& id)>& body);

}  // namespace shardjit::bench
