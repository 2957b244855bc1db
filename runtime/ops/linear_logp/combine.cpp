#include "runtime/ops/linear_logp/combine.hpp"

#include <algorithm>

#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {
constexpr unsigned kThreads = 256;  // matches kLogpCombineThreads in the template

// Rows a block merges: one a group of combine_lanes_per_row lanes (templates/linear_logp/combine.cuh).
std::int64_t rows_per_block(int sources) { return kThreads / kernels::combine_lanes_per_row(sources); }

}  // namespace

void check_combine_sources(const kernels::LogpCombineArgs& args) {
  if (args.sources >= 1 && args.sources <= kMaxCombineSources) return;
  throw Error(ErrorCode::kInternal, "logp_combine: " + std::to_string(args.sources) + " sources; expected 1 to " +
                                        std::to_string(kMaxCombineSources));
}

KernelSpec logp_combine_spec(DType target_dtype, bool entropy, int peers) {
  return KernelSpec("logp_combine", {{"TargetT", TypeArg{dtype_name(target_dtype)}},
                                     {"ENTROPY", entropy},
                                     {"PEERS", std::int64_t{peers}}});
}

void launch_logp_combine(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, CUstream stream) {
  check_combine_sources(args);
  if (args.n_rows == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((args.n_rows + rows_per_block(args.sources) - 1) / rows_per_block(args.sources));
  shape.block_x = kThreads;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit

namespace shardjit {

void launch_logp_combine_peers(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, int blocks,
                               CUstream stream) {
  check_combine_sources(args);
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(blocks);
  shape.block_x = kThreads;
  launch(kernel, shape, args, stream);
}

int logp_combine_peer_blocks(std::int64_t n_rows, int sources, int max_blocks) {
  const std::int64_t wanted = (n_rows + rows_per_block(sources) - 1) / rows_per_block(sources);
  return static_cast<int>(std::clamp<std::int64_t>(wanted, 1, max_blocks));
}

}  // namespace shardjit
