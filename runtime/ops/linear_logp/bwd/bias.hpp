// Host side of templates/linear_logp/bwd_bias.cuh: grad_bias of a vocabulary chunk as the column
// sums of its dZ buffer, in a fixed order.
#pragma once

#include <cuda.h>

#include "linear_logp/bwd_bias_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

KernelSpec linear_logp_bwd_bias_spec(DType dz, DType out);

// Nothing is launched for zero columns; zero rows give alpha * 0 + addend.
void launch_linear_logp_bwd_bias(const LoadedKernel& kernel, const kernels::LinearLogpBwdBiasArgs& args,
                                 CUstream stream);

}  // namespace shardjit
