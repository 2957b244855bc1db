// LinearLogp::Impl: the state an op keeps between calls (layout, loaded kernels, workspace,
// device status word). Shared by the files that implement the op's calls.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "linear_logp/combine_args.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/partials.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp/bwd/state.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/ops/single_caller.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

struct LinearLogpTp;

// One forward call's views, checked.
struct ForwardCall {
  const LinearLogpInputs& in;
  const LinearLogpOutputs& out;
  std::int64_t n = 0;
  std::int64_t hidden_stride = 0;
  std::int64_t weight_stride = 0;
  bool has_lse = false;
  bool has_entropy = false;
};

// The most backward chunks a forward keeps: the first in the dZ buffer, the second in the
// grad_hidden accumulator's memory (BwdChunkPlan::kept_band_rows).
inline constexpr int kMaxKeptChunks = 2;

// A single-GPU forward's work for a call: the forward kernel's split plan over the shard's columns
// from kept_cols on, and the backward's first kept_chunks chunks, columns [0, kept_cols), which
// the kept chunk's kernel computes instead (templates/linear_logp/fwd_keep.cuh; 0: none). The
// combine merges the splits' sources, then a source per column tile of the kept chunks.
struct ForwardPlan {
  SplitPlan split;
  int kept_chunks = 0;
  std::int64_t kept_cols = 0;
  int kept_tiles = 0;
  // With kept chunks: the backward's plan of these rows, its buffers what the forward writes
  // (accumulator_bytes 0 unless the second chunk is kept).
  BwdChunkPlan chunks;

  int sources() const { return split.sources() + kept_tiles; }
};

struct LinearLogp::Impl {
  // `tp`: the degree of the tensor-parallel group the op is built for (its combine kernel
  // merges tp x splits sources); 1 for a single-GPU op. `fwd_tile`: the forward's tile; left
  // out, the one tuned_fwd_tile gives (linear_logp_tuning.hpp). A TP op passes the default tile,
  // which every rank can know of every other.
  Impl(Runtime::Impl& runtime, const LinearLogpConfig& config, int tp = 1,
       std::optional<FwdTile> fwd_tile = std::nullopt);
  ~Impl();

  // A single-GPU forward's two launches for `call` on `stream`.
  void enqueue_forward(const ForwardCall& call, CUstream stream);

  // The arguments of the two forward kernels for `call`, reading / writing `partials`; the
  // combine merges `sources` partials a row (tp x splits).
  kernels::LinearLogpFwdArgs fwd_args(const ForwardCall& call, kernels::RowPartial* partials,
                                      const SplitPlan& plan) const;
  kernels::LogpCombineArgs combine_args(const ForwardCall& call, const kernels::RowPartial* partials,
                                        int sources) const;
  // The combine kernel's peer variant (TP ops of up to kMaxPeers ranks).
  const LoadedKernel& peer_combine_kernel() const;

  // A call of fewer rows than the forward tile on the Hopper loop: copies its X rows into
  // x_stage, a tile high, and points `args` there, so that the kernel's TMA boxes of X lie inside
  // their tensor (a box mostly past the tensor's rows made the whole kernel ~30 % slower at
  // N <= 16, docs/perf-notes.md, "Forward: calls of fewer rows than a tile"). Returns the rows of
  // X's storage the kernel may read: the tile's when staged, else args.n_rows.
  std::int64_t stage_small_call(kernels::LinearLogpFwdArgs& args, CUstream stream) const;

  void ensure_workspace(std::int64_t partial_rows, CUstream stream);
  std::int64_t workspace_rows_for(std::int64_t n_rows) const;
  // The forward kernel's plan for n_rows rows over the shard's columns from first_col on.
  SplitPlan split_plan(std::int64_t n_rows, std::int64_t first_col = 0) const;
  // `keep`: how many of its first backward chunks the call may keep, 0 to kMaxKeptChunks (a call
  // that writes lse, which the backward of the same inputs passes back, may keep them).
  ForwardPlan forward_plan(std::int64_t n_rows, int keep) const;
  // The kept chunks' kernel of a call, a launch a chunk, writing their partials to `partials` (the
  // plan's sources past the splits'); returns what it keeps, for bwd.kept once the forward is
  // enqueued.
  KeptChunk enqueue_kept_chunk(const ForwardCall& call, const ForwardPlan& plan, kernels::RowPartial* partials,
                               CUstream stream);

  Runtime::Impl& runtime;
  LinearLogpLayout layout;
  DeviceContext& device;
  LinearLogpKernels kernels;
  FwdTile tile;
  std::shared_ptr<const LoadedKernel> fwd;
  std::shared_ptr<const LoadedKernel> combine;
  std::shared_ptr<const LoadedKernel> peer_combine;  // TP ops of up to kMaxPeers ranks
  DeviceBuffer workspace;  // RowPartial [sources][n_rows]
  DeviceBuffer x_stage;    // [tile.bm][hidden] of the input dtype (Hopper loop only): stage_small_call
  DeviceBuffer status;     // kernels::DeviceStatus
  // The backward's kernels and buffers (empty without config.want_backward); built from the
  // members above, so it is declared after them.
  LinearLogpBwdState bwd{runtime, layout, device, kernels};
  // Tensor parallelism (null for a single-GPU op): the communicator, the agreed layout, the
  // gathered partials and the plans. Set right after the members above are built.
  std::unique_ptr<LinearLogpTp> tp;
  SingleCaller calls;  // forward, backward and check: one thread at a time
};

}  // namespace shardjit
