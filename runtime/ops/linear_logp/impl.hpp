// LinearLogp::Impl: the state an op keeps between calls (layout, loaded kernels, workspace,
// device status word). Shared by the files that implement the op's calls.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/combine_args.cuh"
#include "linear_logp/fwd_args.cuh"
#include "linear_logp/partials.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp/bwd/state.hpp"
#include "runtime/ops/linear_logp/keep.hpp"
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

// A forward kernel as loaded, with the tile it was built for.
struct FwdKernel {
  FwdTile tile;
  std::shared_ptr<const LoadedKernel> kernel;
};

struct LinearLogp::Impl {
  // `tp`: the degree of the tensor-parallel group the op is built for (its combine kernel
  // merges tp x splits sources); 1 for a single-GPU op. `fwd_tile`: the forward's tile; left
  // out, the one tuned_fwd_tile gives (linear_logp_tuning.hpp). A TP op passes the default tile,
  // which every rank can know of every other.
  Impl(Runtime::Impl& runtime, const LinearLogpConfig& config, int tp = 1,
       std::optional<FwdTile> fwd_tile = std::nullopt);
  ~Impl();

  // A single-GPU forward's launches for `call` on `stream`: the kept chunks' (if any), the forward
  // kernel's (unless the kept chunks are the whole shard), and the combine kernel's where the
  // forward kernel does not merge the partials itself (fwd_merges_in_kernel or SHARDJIT_FWD_MERGE
  // says no, the portable loops, or no forward kernel).
  void enqueue_forward(const ForwardCall& call, CUstream stream);

  // The arguments of the two forward kernels for `call`, reading / writing `partials`; the
  // combine merges `sources` partials a row (tp x splits).
  kernels::LinearLogpFwdArgs fwd_args(const ForwardCall& call, kernels::RowPartial* partials,
                                      const VocabSplit& plan) const;
  kernels::LogpCombineArgs combine_args(const ForwardCall& call, const kernels::RowPartial* partials,
                                        int sources) const;
  // The combine kernel's peer variant (TP ops of up to kMaxPeers ranks).
  const LoadedKernel& peer_combine_kernel() const;

  void ensure_workspace(std::int64_t partial_rows, CUstream stream);
  std::int64_t workspace_rows_for(std::int64_t n_rows) const;
  // The forward kernel's vocabulary split for n_rows rows over the shard's columns from first_col
  // on, in the op's tile or, where other_tile_pays says so, one of its other tiles (choose_fwd_plan).
  // `keeps`: for a forward that would keep the backward's one chunk itself (forward_keeps), among
  // keeping_plan_tiles, so that a plan of the rows as N is one a keeping kernel runs.
  VocabSplit vocab_split(std::int64_t n_rows, std::int64_t first_col = 0, bool keeps = false) const;
  // The forward kernel and tile a plan runs: the op's own, or the other tile of its width and
  // orientation; with `keeps`, that tile's kernel which keeps the backward's chunk (keeping_fwd).
  // find_fwd gives nothing where the op has none, fwd_of_plan throws.
  std::optional<FwdKernel> find_fwd(const VocabSplit& plan, bool keeps) const;
  FwdKernel fwd_of_plan(const VocabSplit& plan, bool keeps = false) const;
  // The launch of a forward of n_rows rows that keeps at most `most_kept` of its backward's first
  // chunks (0 to kAnyKeptChunks), as the op, the chunks' shape, the keep budget and the
  // combine allow (keep.hpp).
  ForwardLaunch forward_launch(std::int64_t n_rows, int most_kept) const;
  // The keep decision of a call on `stream`: forward_launch, with fewer kept chunks where they
  // would grow a buffer past what max_rows sized or during graph capture (keep.cpp).
  ForwardLaunch decide_forward_launch(const ForwardCall& call, CUstream stream) const;
  // The kept chunks' kernel of a call, a launch a chunk, writing their partials to `partials` (the
  // plan's sources past the splits'); returns what it keeps, for bwd.kept once the forward is
  // enqueued.
  KeptChunk enqueue_kept_chunk(const ForwardCall& call, const ForwardLaunch& launch, kernels::RowPartial* partials,
                               CUstream stream);

  Runtime::Impl& runtime;
  LinearLogpLayout layout;
  DeviceContext& device;
  LinearLogpKernels kernels;
  FwdTile tile;
  std::shared_ptr<const LoadedKernel> fwd;
  std::vector<FwdKernel> other_fwd;  // kernels.other_fwd, loaded
  std::vector<FwdTile> plan_tiles;   // the tiles of other_fwd that choose_fwd_plan may pick
  std::vector<FwdKernel> keeping_fwd;  // kernels.keeping_fwd, loaded
  // plan_tiles less the tiles of the rows as N that have no keeping kernel (256 columns, and 168
  // rows with entropy; keeping_fwd_plan_tiles): a keeping forward's plan is one of the rows as M
  // or one that keeping_fwd runs.
  std::vector<FwdTile> keeping_plan_tiles;
  std::shared_ptr<const LoadedKernel> combine;
  std::shared_ptr<const LoadedKernel> peer_combine;  // TP ops of up to kMaxPeers ranks
  DeviceBuffer workspace;  // RowPartial [sources][n_rows]
  DeviceBuffer arrivals;   // unsigned int a row tile of the largest call, zero between calls (Hopper
                           // loop only): the forward kernel's merge (templates/linear_logp/fwd_merge.cuh)
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
