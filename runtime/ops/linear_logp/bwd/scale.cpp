#include "runtime/ops/linear_logp/bwd/scale.hpp"

#include "runtime/sched/launch.hpp"

namespace shardjit {

KernelSpec linear_logp_bwd_scale_spec() {
  return KernelSpec("linear_logp_bwd_scale", {{"LIMIT_LOG2", std::int64_t{kBwdScaleLimitLog2}}});
}

void launch_linear_logp_bwd_scale(const LoadedKernel& kernel, const kernels::LinearLogpBwdScaleArgs& args,
                                  CUstream stream) {
  LaunchShape shape;
  shape.block_x = 1024;  // kBwdScaleThreads in the template
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
