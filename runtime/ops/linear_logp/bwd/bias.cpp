#include "runtime/ops/linear_logp/bwd/bias.hpp"

#include "runtime/sched/launch.hpp"

namespace shardjit {
namespace {
constexpr unsigned kThreads = 256;  // kBiasGradThreads in the template
constexpr unsigned kCols = 64;      // kBiasGradCols in the template
}  // namespace

KernelSpec linear_logp_bwd_bias_spec(DType dz, DType out) {
  return KernelSpec("linear_logp_bwd_bias", {{"DZ", TypeArg{dtype_name(dz)}}, {"OutT", TypeArg{dtype_name(out)}}});
}

void launch_linear_logp_bwd_bias(const LoadedKernel& kernel, const kernels::LinearLogpBwdBiasArgs& args,
                                 CUstream stream) {
  if (args.cols == 0) return;
  LaunchShape shape;
  shape.grid_x = (static_cast<unsigned>(args.cols) + kCols - 1) / kCols;
  shape.block_x = kThreads;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
