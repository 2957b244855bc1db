// Host side of templates/linear_logp/bwd_scale.cuh: the power of two that 16-bit dZ is stored
// scaled by, chosen on the device from the upstream gradients.
#pragma once

#include <cuda.h>

#include "linear_logp/bwd_scale_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"

namespace shardjit {

// The largest |dZ| is scaled below 2^15: fp16's largest value is 65504, just under 2^16.
inline constexpr int kBwdScaleLimitLog2 = 15;

KernelSpec linear_logp_bwd_scale_spec();

void launch_linear_logp_bwd_scale(const LoadedKernel& kernel, const kernels::LinearLogpBwdScaleArgs& args,
                                  CUstream stream);

}  // namespace shardjit
