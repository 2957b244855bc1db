// The plans of a tensor-parallel LinearLogp (plain data, see runtime/sched/plan.hpp) and the
// split arithmetic every rank must do alike so that their partial buffers match.
//
// Forward: each rank's fused kernel writes its partials [splits][N] into its slot of a buffer
// [tp][splits][N]; ONE all-gather (in place) fills the other slots; the combine kernel merges
// the S = tp x splits sources of each row in the fixed order rank 0 split 0, rank 0 split 1, ...,
// so every rank computes bitwise the same logp, lse and entropy. Peer path (the GPUs of one
// host, buffers sized at build): the fused kernel writes into this rank's symmetric buffer and
// the combine kernel reads every rank's partials there itself: two launches, no collective.
//
// Backward: grad_hidden is accumulated in fp32 and all-reduced (sum) on the comm stream while
// the compute stream does the last vocabulary chunk's grad_weight (and grad_bias); then it is
// rounded into the caller's grad_hidden. grad_weight and grad_bias stay local.
#pragma once

#include <cstdint>

#include "runtime/ops/linear_logp/tp/layout.hpp"
#include "runtime/sched/plan.hpp"

namespace shardjit {

// The action numbers of the TP plans' launch and collective steps.
enum TpAction : int {
  kTpForwardKernel = 0,      // launch: the forward kernel into this rank's slot of the partials
  kTpAllGatherPartials,      // collective: ncclAllGather of the partials, in place
  kTpCombine,                // launch: logp_combine over tp x splits sources
  kTpBackwardChunks,         // launch: every chunk but the last; the last chunk's dZ and its
                             //   grad_hidden term; all of grad_hidden into the fp32 accumulator
                             //   (the dZ scale kernel is launched on the same stream just before)
  kTpAllReduceGradHidden,    // collective: ncclAllReduce (sum, fp32) of the accumulator, in place
  kTpBackwardLastWeight,     // launch: the last chunk's grad_bias and grad_weight
  kTpRoundGradHidden,        // launch: grad_hidden = the reduced accumulator, in the op's dtype
  kTpPeerCombine,            // launch: logp_combine reading every rank's symmetric buffer
};

Plan tp_forward_plan();
Plan tp_forward_peer_plan();
// With grad_hidden requested; a backward without it has no collective and runs the
// single-GPU sequence.
Plan tp_backward_plan();

// The largest split count in kVocabSplitChoices with tp x splits <= kMaxCombineSources.
int max_tp_splits(int tp);

// The split plan every rank uses for n_rows rows of row_bytes bytes: choose_vocab_splits over
// the widest shard's valid columns, with the smallest GPU of the group and rank 0's tile,
// capped by max_tp_splits. Depends only on agreed data, so the split count is the same on
// every rank (a narrower shard's splits past its tiles are empty and write empty partials). It
// never cuts units (cut_last_waves): a split's partials are one source.
VocabSplit tp_vocab_splits(const TpLayout& layout, std::int64_t n_rows, std::int64_t row_bytes);

// Rows of RowPartial the gathered buffer needs for any call of up to n_rows rows
// (tp x splits x rows, at its peak).
std::int64_t tp_partial_rows(const TpLayout& layout, std::int64_t n_rows, std::int64_t row_bytes);

}  // namespace shardjit
