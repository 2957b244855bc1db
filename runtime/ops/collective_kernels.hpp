// The kernel specs of the cross-GPU ops, for the ops, the prewarm plan and the tests.
#pragma once

#include <cstdint>

#include "runtime/compile/kernel_spec.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

// templates/collective/reduce_scatter.cuh for `world` ranks and chunks of vec_bytes.
KernelSpec reduce_scatter_spec(DType dtype, int world, int vec_bytes);

// templates/collective/moe_combine.cuh.
KernelSpec moe_combine_spec(DType dtype, int world, std::int64_t hidden, int vec_bytes, bool gates);

}  // namespace shardjit
