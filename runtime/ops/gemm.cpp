#include "runtime/ops/gemm.hpp"

#include "gemm/gemm_layout.cuh"
#include "runtime/ops/linear_logp_fwd.hpp"
#include "runtime/sched/launch.hpp"

namespace shardjit {

GemmTile default_gemm_tile(DType a, DType b, const std::string& arch) {
  GemmTile tile;
  const bool tensor_cores = a == b && a != DType::kFP32;
  if (!tensor_cores) {
    tile.bk = 16;
    tile.stages = 3;
  }
  const unsigned limit = smem_limit_for_arch(arch);
  while (tile.stages > 2 && gemm_smem(a, b, tile) > limit) --tile.stages;
  return tile;
}

KernelSpec gemm_spec(const GemmKind& kind, const GemmTile& tile) {
  return KernelSpec("gemm", {{"TA", TypeArg{dtype_name(kind.a)}},
                             {"TB", TypeArg{dtype_name(kind.b)}},
                             {"OutT", TypeArg{dtype_name(kind.out)}},
                             {"AddT", TypeArg{dtype_name(kind.addend)}},
                             {"A_TRANS", kind.a_trans},
                             {"BM", std::int64_t{tile.bm}},
                             {"BN", std::int64_t{tile.bn}},
                             {"BK", std::int64_t{tile.bk}},
                             {"STAGES", std::int64_t{tile.stages}},
                             {"FILTER", kind.filter}});
}

unsigned gemm_smem(DType a, DType b, const GemmTile& tile) {
  return static_cast<unsigned>(kernels::gemm_smem_bytes(static_cast<int>(dtype_size(a)),
                                                        static_cast<int>(dtype_size(b)), tile.bm, tile.bn,
                                                        tile.bk, tile.stages));
}

void launch_gemm(const LoadedKernel& kernel, const kernels::GemmArgs& args, const GemmTile& tile, unsigned smem_bytes,
                 CUstream stream) {
  if (args.m == 0 || args.n == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((args.m + tile.bm - 1) / tile.bm);
  shape.grid_y = static_cast<unsigned>((args.n + tile.bn - 1) / tile.bn);
  shape.block_x = static_cast<unsigned>(kernels::gemm_threads);
  shape.smem_bytes = smem_bytes;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
