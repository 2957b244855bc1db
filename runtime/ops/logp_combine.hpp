// Host side of templates/linear_logp/combine.cuh: the kernel that merges per-row partial
// statistics of S sources (vocabulary splits, TP ranks) into logp, lse and entropy.
#pragma once

#include <cuda.h>

#include "linear_logp/combine_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

// The most partial sources (vocabulary splits x TP ranks) one combine kernel merges.
inline constexpr int kMaxCombineSources = 1024;

KernelSpec logp_combine_spec(int sources, DType target_dtype, bool entropy);

// One thread per row; nothing is launched for zero rows.
void launch_logp_combine(const LoadedKernel& kernel, const kernels::LogpCombineArgs& args, CUstream stream);

}  // namespace shardjit
