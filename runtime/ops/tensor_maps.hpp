// TMA maps of the operands of the TMA-fed Hopper loops (templates/common/tma_ring.cuh): the GEMM's
// A storage ([m][a_cols], or [k][a_cols] with a_trans), B ([b_rows][n]), addend ([m][n], fp32
// or 16-bit) and 16-bit output ([m][n]); the forward's and the dZ kernel's X ([n_rows][H]) and
// W ([V_VALID][H]), and the dZ kernel's 16-bit output. Row-major, in boxes 128 bytes wide with
// the 128-byte swizzle that wgmma reads (and the box stores write). Encoded on the host for each
// launch from the launch's pointers, by the driver, without touching the device. The callers'
// view checks guarantee what TMA needs of the operands: 16-byte aligned bases and row strides;
// an addend without them is not described (encode_gemm_addend_map).
#pragma once

#include <cstdint>

#include "gemm/gemm_args.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/fwd_args.cuh"
#include "shardjit/dtype.hpp"

namespace shardjit {

// The rows of the TMA box of the last of the tile_rows-row tiles over an operand of `rows` rows:
// its rows rounded up to 8, so that its box lies (almost) inside the operand. A whole last tile
// keeps the tile's box; a call of 150 rows reads its second 128-row tile's 22 in a box of 24, a
// call of 7 rows its one tile in a box of 8. A box past an operand's rows arrives as zeros, and a
// tile-high box over a few rows spends the TMA unit's requests on zeros: at 7 rows of X the
// forward read W at 67 % of DRAM bandwidth with 128-row boxes, 87 % with 8-row boxes
// (docs/perf-notes.md, "Calls of fewer rows than a tile"). The rows of the tile's stage past the
// box then hold stale shared memory; wgmma keeps accumulator rows apart, so they reach only rows
// past the operand, which the kernels never store (templates/common/row_tile_box.cuh).
int tail_box_rows(std::int64_t rows, int tile_rows);

// Fills params.a_map and params.b_map for params.args; dtype is A's and B's (bf16 or fp16). A
// [m][k] is read in row tiles of bm rows: a_map in boxes of bm rows, a_tail_map in boxes of
// params.a_tail_box_rows (tail_box_rows, both set here) for a shorter last tile
// (templates/common/row_tile_box.cuh); A^T (a_trans) in a_map's 64 x 64 boxes.
void encode_gemm_tensor_maps(kernels::GemmParams& params, DType dtype, bool a_trans, int bm);

// Fills params.addend_map for params.args' addend of type dtype, read in tiles of bm rows, where
// TMA can read it (a 16-byte aligned base and row stride); returns whether it did. Without an
// addend it does nothing and returns false.
bool encode_gemm_addend_map(kernels::GemmParams& params, DType dtype, int bm);

// Fills params.out_map for params.args' 16-bit output of type dtype ([m][n]), written in boxes of
// 16 rows x 64 columns.
void encode_gemm_output_map(kernels::GemmParams& params, DType dtype);

// Fills params.x_map, params.x_tail_map, params.x_tail_box_rows and params.w_map for params.args
// (templates/common/row_tile_box.cuh): X's x_rows rows in boxes of bm rows for the whole row tiles
// and of tail_box_rows(x_rows, bm) for a shorter last one, W's in boxes of bn rows (bn <= 256);
// dtype is X's and W's (bf16 or fp16), v_valid the rows of W read (the shard's valid columns), h
// the hidden size.
void encode_dz_tensor_maps(kernels::LinearLogpBwdDzParams& params, DType dtype, std::int64_t h,
                           std::int64_t v_valid, std::int64_t x_rows, int bm, int bn);

// Fills params.dz_map for params.args' dZ buffer of 16-bit type dz ([n_rows][chunk columns up to
// the next multiple of 8], row stride dz_stride), written in boxes of 16 rows x 64 columns.
void encode_dz_output_map(kernels::LinearLogpBwdDzParams& params, DType dz);

// The same maps for the forward's Hopper loop (templates/linear_logp/fwd_hopper.cuh).
void encode_fwd_tensor_maps(kernels::LinearLogpFwdParams& params, DType dtype, std::int64_t h,
                            std::int64_t v_valid, std::int64_t x_rows, int bm, int bn);

}  // namespace shardjit
