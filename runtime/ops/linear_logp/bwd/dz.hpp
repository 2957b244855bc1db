// Host side of templates/linear_logp/bwd_dz.cuh and bwd_dz_hopper.cuh: the kernel that recomputes
// the logits of one vocabulary chunk and writes dZ, the gradient with respect to X W^T + b, for
// the GEMMs; and of the kept chunk's two kernels, which walk the same tiles.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "linear_logp/bwd_dz_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/sched/stream_k_workspace.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

// 16-bit inputs: the Hopper main loop's tile where it applies (hopper_logit_tile, four stages), else the first
// of the forward's tiles whose shared memory (logit tile included) fits the arch (128 x 256 x 64
// x 3 on Hopper, 128 x 256 x 32 x 3 on A100, 64-row tiles on the ~100 KiB parts). fp32:
// 128 x 128 x 32, the pipeline shortened, then the rows halved, to fit.
FwdTile default_bwd_dz_tile(DType dtype, const std::string& arch, bool hopper_path);

unsigned linear_logp_bwd_dz_smem(DType dtype, const FwdTile& tile);

// The dZ kernel of a tile: on the Hopper loop (tile.wgmma) linear_logp_bwd_dz_hopper, whose spec
// holds no shape (the same kernel for every model of the dtypes: built with the library), else
// the portable linear_logp_bwd_dz, specialized for the shard.
KernelSpec linear_logp_bwd_dz_spec(const LinearLogpLayout& layout, DType dz, const FwdTile& tile, bool filter);

// The kept chunk's two kernels (templates/linear_logp/fwd_keep.cuh, bwd_kept_dz.cuh): the forward's,
// on the dZ kernel's tile (`tile`, the Hopper loop's), and the backward's, for a dZ of type `dz` and
// maxima by tiles of `tile_cols` columns (the forward's tile's: the dZ tile's, or
// kKeptColumnTileCols where the forward's tiles of the rows as N kept the chunk). Neither spec
// holds the shape (the shard's valid columns come in the arguments).
KernelSpec linear_logp_fwd_keep_spec(const LinearLogpLayout& layout, const FwdTile& tile);
KernelSpec linear_logp_bwd_kept_dz_spec(const LinearLogpLayout& layout, DType dz, int tile_cols);

// The arguments every kernel that walks a vocabulary chunk's logit tiles takes (the dZ kernel,
// the kept chunk's two): the inputs of n rows with their row strides, the shard (its valid
// columns included), and the chunk [chunk_begin, chunk_begin + chunk_cols) in `dz`, dz_stride
// elements a row. The caller adds what its kernel reads besides (lse, the upstream gradients, the
// scale, the mask, tile_partials).
kernels::LinearLogpBwdDzArgs chunk_logit_args(const LinearLogpLayout& layout, const LinearLogpInputs& in,
                                              std::int64_t n, std::int64_t hidden_stride, std::int64_t weight_stride,
                                              void* dz, std::int64_t dz_stride, std::int64_t chunk_begin,
                                              std::int64_t chunk_cols);

// Grid: row tiles x column tiles of the chunk (args.chunk_cols), a tile a block, with
// linear_logp_bwd_dz_smem's shared memory; the Hopper tile (tile.wgmma) runs at most
// split.resident_blocks() persistent blocks (the multiprocessors: one block each), splits a grid
// of few tiles along K in `split` (templates/common/stream_k.cuh) and reads X and W, and writes
// a 16-bit dZ (`dz`, the kernel's dZ type), through TMA maps encoded here from args and the
// layout (X's last row tile, where shorter, in a box of its rows rounded up to 8: tail_box_rows).
// Nothing is launched for zero rows or columns.
void launch_linear_logp_bwd_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                               const LinearLogpLayout& layout, const FwdTile& tile, DType dz,
                               const StreamKWorkspace& split, CUstream stream);

// The kept chunk's dZ (linear_logp_bwd_kept_dz): rows x linear_logp_bwd_kept_dz_row_blocks blocks
// (more than one a row only for fewer rows than the device's multiprocessors); nothing for zero rows.
void launch_linear_logp_bwd_kept_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                                    int multiprocessors, CUstream stream);

}  // namespace shardjit
