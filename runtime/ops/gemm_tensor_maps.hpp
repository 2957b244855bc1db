// TMA maps of the GEMM's operands for its TMA-fed Hopper loop (templates/gemm/gemm_tma.cuh): A's
// storage ([m][a_cols], or [k][a_cols] with a_trans) and B ([b_rows][n]), 16-bit, row-major, in
// the boxes that loop copies (128 bytes wide, 128-byte swizzle). Encoded on the host for each
// launch from the launch's pointers, by the driver, without touching the device. The callers'
// view checks guarantee what TMA needs: 16-byte aligned bases and row strides.
#pragma once

#include "gemm/gemm_args.cuh"
#include "shardjit/dtype.hpp"

namespace shardjit {

// Fills params.a_map and params.b_map for params.args; dtype is A's and B's (bf16 or fp16).
void encode_gemm_tensor_maps(kernels::GemmParams& params, DType dtype, bool a_trans);

}  // namespace shardjit
