// Every kernel a LinearLogp op of a given layout loads. The op builds from this list and
// `shardjit prewarm` compiles from it, so a prewarmed cache always holds what the op asks for.
#pragma once

#include <optional>
#include <vector>

#include "runtime/compile/kernel_spec.hpp"
#include "runtime/ops/linear_logp/bwd/kernels.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/layout.hpp"

namespace shardjit {

// The forward of one of the other Hopper tiles (hopper_other_fwd_tiles).
struct OtherFwdSpec {
  FwdTile tile;
  KernelSpec spec;
};

struct LinearLogpKernels {
  FwdTile tile;
  KernelSpec fwd;
  // Merges the tp x splits partials of each row, whatever the split count.
  KernelSpec combine;
  // With 2 <= tp <= kMaxPeers: the same merge reading the partials from the ranks' symmetric
  // buffers (the TP forward's peer path).
  std::optional<KernelSpec> peer_combine;
  std::optional<LinearLogpBwdKernels> backward;  // with config.want_backward
  // A single-GPU op on the default Hopper tile also loads the forwards of the other Hopper tiles
  // (hopper_other_fwd_tiles), for the calls choose_fwd_plan gives them (fwd.hpp); an op pinned to
  // a tile (a tuning record, SHARDJIT_FWD_TILE) runs that tile at every call.
  std::vector<OtherFwdSpec> other_fwd;
  // An op that keeps its backward's chunks (backward->kept_dz_columns) also loads, for each of its
  // tiles of the rows as N of 128 columns (the op's own or other_fwd's; fwd_tile_keeps), that
  // tile's forward which keeps a single chunk itself (linear_logp_fwd_spec's `keeps`): a kernel
  // apart, so that the forwards which keep nothing carry none of its registers. The 256-column
  // tiles have none, nor, in an op with entropy, the 168-row tile (kFwdKeepMostRowsWithEntropy): a
  // call that keeps its chunk in the forward plans without them (LinearLogp::Impl::keeping_plan_tiles).
  std::vector<OtherFwdSpec> keeping_fwd;
};

// `tp`: the tensor-parallel degree of the group the op is built for (1: a single-GPU op).
// `hopper_path`: RuntimeConfig::hopper_path (whether sm_90a targets take the wgmma main loop).
// `fwd_tile`: the forward's tile where a tuning record chose one (runtime/ops/linear_logp/tuning.hpp),
// else default_fwd_tile's.
LinearLogpKernels linear_logp_kernels(const LinearLogpLayout& layout, const std::string& arch, int tp = 1,
                                      bool hopper_path = true, std::optional<FwdTile> fwd_tile = std::nullopt);

}  // namespace shardjit
