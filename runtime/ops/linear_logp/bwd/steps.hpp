// The launches of a LinearLogp backward, a function a step: the dZ scale, then per vocabulary
// chunk its dZ, its bias sums, grad_weight[chunk] and the chunk's grad_hidden product (in bands
// over a second kept chunk), and for tensor parallelism the rounding of the reduced accumulator.
// LinearLogp::backward (bwd.cpp) calls them in order; docs/architecture.md says why this order.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "runtime/ops/linear_logp/bwd/call.hpp"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/bwd/state.hpp"
#include "runtime/ops/linear_logp/keep.hpp"

namespace shardjit {

// What every step of one call reads: the call, the op's backward state, the call's chunks, the
// kept chunks it uses, and the dZ storage scale.
struct BackwardPass {
  BackwardPass(const BackwardCall& backward_call, LinearLogpBwdState& state) : call(backward_call), bwd(state) {}

  const BackwardCall& call;
  LinearLogpBwdState& bwd;
  BackwardChunks chunks;
  const KeptChunk* kept = nullptr;  // what the last forward kept; null: nothing
  KeptChunksUse kept_use;
  // TP with reduce_hidden: every grad_hidden term goes into the fp32 accumulator, which is
  // all-reduced and then rounded into grad_hidden. Without it a TP op runs the single-GPU steps.
  bool tp_reduce = false;
  // 16-bit dZ is stored times s (scale[0] = s, scale[1] = 1 / s); null: fp32 dZ, unscaled.
  const float* scale = nullptr;

  const float* inv_scale() const { return scale != nullptr ? scale + 1 : nullptr; }
  // The chunk whose grad_hidden product runs first (writes the accumulator rather than adding):
  // chunk 1 where it was kept in the accumulator's memory, so that its logits are read before
  // chunk 0's product writes there.
  std::int64_t first_hidden_chunk() const { return kept_use.second ? 1 : 0; }
};

// The launches of one chunk, as bits: a single-GPU call enqueues all of them, in this order; a
// TP call splits the last chunk around the all-reduce.
enum ChunkPart : unsigned {
  kChunkDz = 1u,
  kChunkBias = 2u,
  kChunkWeight = 4u,
  kChunkHidden = 8u,
  kChunkAll = 15u,
};

// 16-bit dZ: launches the kernel that picks the power of two dZ is stored times, from the
// upstream gradients, and returns where it writes it (s, then 1 / s). fp32 dZ: null, nothing.
const float* enqueue_dz_scale(LinearLogpBwdState& bwd, const BackwardCall& call, CUstream stream);

void enqueue_chunk_dz(const BackwardPass& pass, std::int64_t index, CUstream stream);
void enqueue_chunk_bias_sums(const BackwardPass& pass, std::int64_t index, CUstream stream);
void enqueue_chunk_grad_weight(const BackwardPass& pass, std::int64_t index, CUstream stream);
void enqueue_chunk_grad_hidden(const BackwardPass& pass, std::int64_t index, CUstream stream);

// The parts of chunk `index` (ChunkPart bits) that the call asks for, in the order above.
void enqueue_chunk(const BackwardPass& pass, std::int64_t index, unsigned parts, CUstream stream);

// Every chunk whole, first_hidden_chunk() first: a call with nothing to reduce across ranks.
void enqueue_all_chunks(const BackwardPass& pass, CUstream stream);

// TP: grad_hidden = the all-reduced fp32 accumulator, rounded to the op's dtype.
void enqueue_round_grad_hidden(const BackwardPass& pass, CUstream stream);

}  // namespace shardjit
