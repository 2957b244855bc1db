#include "runtime/ops/linear_logp/tp/plan.hpp"

#include <algorithm>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/combine.hpp"

namespace shardjit {

Plan tp_forward_plan() {
  Plan plan;
  plan.name = "linear_logp tp forward";
  plan.launch(kTpForwardKernel, "the forward kernel: this rank's partials [splits][N]");
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "partials written");
  plan.collective(kTpAllGatherPartials, "ncclAllGather partials -> [tp][splits][N]");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "partials gathered");
  plan.launch(kTpCombine, "logp_combine S = tp x splits");
  return plan;
}

Plan tp_forward_peer_plan() {
  Plan plan;
  plan.name = "linear_logp tp forward (peer memory)";
  plan.launch(kTpForwardKernel, "the forward kernel: this rank's partials into its symmetric buffer");
  plan.launch(kTpPeerCombine, "logp_combine S = tp x splits over every rank's symmetric buffer");
  return plan;
}

Plan tp_backward_plan() {
  Plan plan;
  plan.name = "linear_logp tp backward";
  plan.launch(kTpBackwardChunks, "dZ chunks; grad_hidden terms into the fp32 accumulator");
  plan.hand_off(StreamRole::kCompute, StreamRole::kComm, "grad_hidden partial complete");
  plan.collective(kTpAllReduceGradHidden, "ncclAllReduce sum grad_hidden (fp32)");
  // Enqueued after the hand-off, so it overlaps the all-reduce.
  plan.launch(kTpBackwardLastWeight, "last chunk: grad_bias, grad_weight");
  plan.hand_off(StreamRole::kComm, StreamRole::kCompute, "grad_hidden reduced");
  plan.launch(kTpRoundGradHidden, "grad_hidden = accumulator in the op's dtype");
  return plan;
}

int max_tp_splits(int tp) {
  int most = 1;
  for (int splits : kVocabSplitChoices) {
    if (static_cast<std::int64_t>(std::max(tp, 1)) * splits <= kMaxCombineSources) most = splits;
  }
  return most;
}

VocabSplit tp_vocab_splits(const TpLayout& layout, std::int64_t n_rows, std::int64_t row_bytes) {
  FwdTile tile = layout.split_tile;
  if (tile.bm <= 0 || tile.bn <= 0) tile = FwdTile{};
  GpuShape gpu = layout.gpu;
  if (gpu.sm_count <= 0) gpu.sm_count = 1;
  // Five points: every split's partials also reach the other ranks (the all-gather, or the peer
  // combine's reads over NVLink): at 16k rows a 64-way split fills the uncut waves 1.5 % better
  // than an 8-way one but sends 8 times the partials (32 MiB a rank instead of 4). No cut: a
  // split's partials are one source.
  return choose_vocab_splits(n_rows, row_bytes, std::max<std::int64_t>(layout.max_valid_local, 1), tile, gpu, 0.05,
                             max_tp_splits(layout.tp), /*cuts_last_waves=*/false);
}

std::int64_t tp_partial_rows(const TpLayout& layout, std::int64_t n_rows, std::int64_t row_bytes) {
  const int bm = layout.split_tile.bm > 0 ? layout.split_tile.bm : FwdTile{}.bm;
  return layout.tp * max_partial_rows(n_rows, bm, [&](std::int64_t rows) {
           return tp_vocab_splits(layout, rows, row_bytes).sources();
         });
}

}  // namespace shardjit
