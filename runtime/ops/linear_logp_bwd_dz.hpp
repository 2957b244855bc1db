// Host side of templates/linear_logp/bwd_dz.cuh: the kernel that recomputes the logits of one
// vocabulary chunk and writes dZ, the gradient with respect to X W^T + b, for the GEMMs.
#pragma once

#include <cuda.h>

#include <string>

#include "linear_logp/bwd_dz_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp_fwd.hpp"
#include "runtime/ops/linear_logp_layout.hpp"

namespace shardjit {

// 128 x 128 tiles for the forward's main loops, with the pipeline shortened, then the K slice
// and the rows halved, where the arch's shared memory cannot hold them next to the epilogue's.
FwdTile default_bwd_dz_tile(DType dtype, const std::string& arch);

unsigned linear_logp_bwd_dz_smem(DType dtype, const FwdTile& tile);

KernelSpec linear_logp_bwd_dz_spec(const LinearLogpLayout& layout, DType dz, const FwdTile& tile, bool filter);

// Grid: row tiles x column tiles of the chunk (args.chunk_cols); nothing for zero rows or columns.
void launch_linear_logp_bwd_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                               const FwdTile& tile, unsigned smem_bytes, CUstream stream);

}  // namespace shardjit
