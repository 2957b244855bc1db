#include "runtime/ops/linear_logp/kernels.hpp"

#include "collective/peer_sync_args.cuh"
#include "runtime/ops/linear_logp/combine.hpp"

namespace shardjit {

LinearLogpKernels linear_logp_kernels(const LinearLogpLayout& layout, const std::string& arch, int tp,
                                      bool hopper_path, std::optional<FwdTile> fwd_tile) {
  const LinearLogpConfig& c = layout.config;
  const FwdTile tile = fwd_tile.value_or(default_fwd_tile(c.dtype, arch, hopper_path));
  LinearLogpKernels kernels{tile, linear_logp_fwd_spec(layout, tile), logp_combine_spec(c.target_dtype, c.want_entropy),
                            std::nullopt, std::nullopt, {}, {}};
  if (tp >= 2 && tp <= shardjit::kernels::kMaxPeers) {
    kernels.peer_combine = logp_combine_spec(c.target_dtype, c.want_entropy, tp);
  }
  if (tp == 1 && !fwd_tile) {
    for (const FwdTile& other : hopper_other_fwd_tiles(c.dtype, arch, hopper_path)) {
      kernels.other_fwd.push_back({other, linear_logp_fwd_spec(layout, other)});
    }
  }
  if (c.want_backward) kernels.backward = linear_logp_bwd_kernels(layout, arch, hopper_path, tp);
  if (kernels.backward && kernels.backward->kept_dz_columns) {
    std::vector<FwdTile> tiles{tile};
    for (const OtherFwdSpec& other : kernels.other_fwd) tiles.push_back(other.tile);
    for (const FwdTile& t : tiles) {
      if (fwd_tile_keeps(t, c.want_entropy)) kernels.keeping_fwd.push_back({t, linear_logp_fwd_spec(layout, t, true)});
    }
  }
  return kernels;
}

}  // namespace shardjit
