#include "runtime/ops/collective/peer_collective_plan.hpp"

namespace shardjit {

Plan reduce_scatter_plan(bool peer) {
  Plan plan;
  if (peer) {
    plan.name = "reduce_scatter peer";
    plan.launch(kPeerKernel, "reduce_scatter: copy, barrier, sum over peer memory, barrier");
    return plan;
  }
  plan.name = "reduce_scatter nccl";
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "input written");
  plan.collective(kNcclReduceScatter, "ncclReduceScatter (grouped ncclReduce for uneven blocks)");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "output reduced");
  return plan;
}

Plan moe_combine_plan(bool peer) {
  Plan plan;
  if (peer) {
    plan.name = "moe_combine peer";
    plan.launch(kPeerKernel, "moe_combine: copy, barrier, combine over peer memory, barrier");
    return plan;
  }
  plan.name = "moe_combine nccl";
  plan.launch(kStageRows, "this rank's rows into its slot of the gathered buffer");
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "rows staged");
  plan.collective(kNcclAllGatherRows, "ncclAllGather rows buffers -> [world][capacity][H]");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "rows gathered");
  plan.launch(kLocalCombine, "moe_combine over the gathered buffers");
  return plan;
}

}  // namespace shardjit
