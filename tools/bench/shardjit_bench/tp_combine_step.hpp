// The combine step of a TP LinearLogp forward alone: the op's own plans with the fused forward
// kernel left out, so that what is timed is exactly what TP adds to a forward. Peer path (the op's
// choice within a host): the combine kernel reading every rank's symmetric buffer. NCCL path:
// events, the all-gather of the partials on the communicator's stream, the combine kernel. The
// one white-box benchmark: besides runtime/tooling.hpp it includes the TP forward's own headers
// (its plans, the combine kernel's launch, the peer collective), which no interface exposes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_timer.hpp"
#include "shardjit/shardjit.hpp"

namespace shardjit::bench {

struct CombineStepTiming {
  int splits = 0;     // vocabulary splits per rank the op would use at this N
  double median_us = 0;       // peer path (0 where the peers are not reachable)
  double nccl_median_us = 0;  // NCCL path
};

// Times the step for n_rows rows of the given model shape, even shards over comm's ranks.
CombineStepTiming time_tp_combine_step(Runtime& runtime, Communicator& comm, std::int64_t n_rows, std::int64_t hidden,
                                       std::int64_t vocab, DType dtype, cudaStream_t stream,
                                       const TimingOptions& timing);

}  // namespace shardjit::bench
