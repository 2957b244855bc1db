#include "runtime/ops/logp_combine.hpp"

#include "runtime/sched/launch.hpp"

namespace shardjit {
namespace {
constexpr unsigned kThreads = 256;  // matches kLogpCombineThreads in the template
}

KernelSpec logp_combine_spec(int sources, DType target_dtype, bool entropy) {
  return KernelSpec("logp_combine", {{"S", std::int64_t{sources}},
                                     {"TargetT", TypeArg{dtype_name(target_dtype)}},
                                     {"ENTROPY", entropy}});
}

void launch_logp_combine(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, CUstream stream) {
  if (args.n_rows == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((args.n_rows + kThreads - 1) / kThreads);
  shape.block_x = kThreads;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
