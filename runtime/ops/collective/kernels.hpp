// The kernel specs of the cross-GPU ops, for the ops, the prewarm plan and the tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/compile/kernel_spec.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

// templates/collective/reduce_scatter.cuh for `world` ranks and chunks of vec_bytes.
KernelSpec reduce_scatter_spec(DType dtype, int world, int vec_bytes);

// templates/collective/moe_combine.cuh.
KernelSpec moe_combine_spec(DType dtype, int world, std::int64_t hidden, int vec_bytes, bool gates);

// The widest chunk (16, 8 or 4 bytes) a row of `row_bytes` is a whole number of; throws
// Error(kInvalidArgument) naming `what` when there is none.
int collective_vector_bytes(std::int64_t row_bytes, const std::string& what);

// Every kernel a ReduceScatter and a MoeCombine (with and without gates) of hidden size `hidden`
// load on `world` ranks (1 to 8): what `shardjit prewarm --collectives` compiles. A group of one
// rank runs both on NCCL's path, where ReduceScatter is a copy and loads no kernel, but MoeCombine
// still combines its rows with its kernel.
std::vector<KernelSpec> collective_kernels(DType dtype, int world, std::int64_t hidden);

// The `shardjit prewarm` command that puts those kernels into the cache, for cache-only errors.
std::string collective_prewarm_command(DType dtype, int world, std::int64_t hidden, const std::string& arch);

}  // namespace shardjit
