// The plans of the cross-GPU ops (plain data, see runtime/sched/plan.hpp), per path.
//
// Peer path: one kernel on the caller's stream does everything (copy into the symmetric buffer,
// cross-GPU barriers, the sum); no comm-stream work, no events.
// NCCL path: the collective on the communicator's stream between two hand-offs; the MoE combine
// first stages this rank's rows into its slot of the gathered buffer and ends with the local
// combine kernel.
#pragma once

#include "runtime/sched/plan.hpp"

namespace shardjit {

enum PeerCollectiveAction : int {
  kPeerKernel = 0,        // launch: the peer kernel (reduce_scatter / moe_combine)
  kNcclReduceScatter,     // collective: ncclReduceScatter (grouped ncclReduce for uneven blocks)
  kStageRows,             // launch: copy this rank's rows into its slot (skipped in zero-copy)
  kNcclAllGatherRows,     // collective: ncclAllGather of the rows buffers, in place
  kLocalCombine,          // launch: moe_combine over the gathered buffers, no barriers
};

Plan reduce_scatter_plan(bool peer);
Plan moe_combine_plan(bool peer);

}  // namespace shardjit
