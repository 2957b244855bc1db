#include "runtime/ops/linear_logp_bwd_dz.hpp"

#include "linear_logp/bwd_dz_layout.cuh"
#include "runtime/sched/launch.hpp"

namespace shardjit {

FwdTile default_bwd_dz_tile(DType dtype, const std::string& arch) {
  // Chosen here rather than taken from the forward, whose tiles may grow past what the dZ
  // epilogue's logit tile and registers allow: 128-byte K rows, three stages.
  FwdTile tile;
  tile.bm = 128;
  tile.bn = 128;
  tile.bk = dtype == DType::kFP32 ? 32 : 64;
  tile.stages = 3;
  const unsigned limit = smem_limit_for_arch(arch);
  while (tile.stages > 2 && linear_logp_bwd_dz_smem(dtype, tile) > limit) --tile.stages;
  if (linear_logp_bwd_dz_smem(dtype, tile) > limit) tile.bk = 32;
  // The fp32 logit tile dominates on the smaller tiers (sm_86, sm_89): halve its rows.
  if (linear_logp_bwd_dz_smem(dtype, tile) > limit) tile.bm = 64;
  return tile;
}

unsigned linear_logp_bwd_dz_smem(DType dtype, const FwdTile& tile) {
  return static_cast<unsigned>(kernels::linear_logp_bwd_dz_smem_bytes(static_cast<int>(dtype_size(dtype)), tile.bm,
                                                                      tile.bn, tile.bk, tile.stages));
}

KernelSpec linear_logp_bwd_dz_spec(const LinearLogpLayout& layout, DType dz, const FwdTile& tile, bool filter) {
  const LinearLogpConfig& c = layout.config;
  return KernelSpec(
      "linear_logp_bwd_dz",
      {{"T", TypeArg{dtype_name(c.dtype)}},
       {"BiasT", TypeArg{c.bias_dtype ? dtype_name(*c.bias_dtype) : "none"}},
       {"TargetT", TypeArg{dtype_name(c.target_dtype)}},
       {"DZ", TypeArg{dtype_name(dz)}},
       {"H", c.hidden},
       {"V_LOCAL", c.vocab_local},
       {"V_VALID", layout.valid_local},
       {"BM", std::int64_t{tile.bm}},
       {"BN", std::int64_t{tile.bn}},
       {"BK", std::int64_t{tile.bk}},
       {"STAGES", std::int64_t{tile.stages}},
       {"FILTER", filter}});
}

void launch_linear_logp_bwd_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                               const FwdTile& tile, unsigned smem_bytes, CUstream stream) {
  if (args.n_rows == 0 || args.chunk_cols == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((args.n_rows + tile.bm - 1) / tile.bm);
  shape.grid_y = static_cast<unsigned>((args.chunk_cols + tile.bn - 1) / tile.bn);
  shape.block_x = static_cast<unsigned>(kernels::linear_logp_bwd_dz_threads);
  shape.smem_bytes = smem_bytes;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
