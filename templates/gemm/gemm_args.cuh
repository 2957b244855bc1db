// Arguments of the GEMM kernel (templates/gemm/gemm.cuh). Shared verbatim by the host and the
// kernel, so only built-in types appear here.
//
//   out[m][n] = alpha * sum_k A[m][k] * B[k][n] + addend[m][n]
//
// A is stored row-major [m][k], or, with the kernel's A_TRANS, as its transpose [k][m]; B is
// stored row-major [k][n]. Rows of a stored matrix are strided, its columns contiguous. The
// contiguous extent of A's storage is a_cols (a multiple of 8 elements); the kernel reads whole
// 16-byte chunks up to it, so values there must be finite (a zero padding, typically). Rows of
// B at or past b_rows read as zeros, so a caller may hide rows of B that hold no data.
#pragma once

#include "common/stream_k.cuh"
#include "common/tma_descriptor.cuh"

namespace shardjit {
namespace kernels {

struct GemmArgs {
  const void* a;              // A's storage, row stride a_stride elements
  const void* b;              // B [k][n], row stride b_stride elements
  void* out;                  // [m][n] of the kernel's output type, row stride out_stride
  const void* addend;         // [m][n] of the kernel's addend type; null: none; may equal out
  const float* alpha;         // device scalar; null: 1
  const unsigned char* mask;  // FILTER only: see below
  long long a_stride;
  long long b_stride;
  long long out_stride;
  long long addend_stride;
  long long m;
  long long n;                // a multiple of 8
  long long k;
  long long a_cols;           // contiguous extent of A's storage, a multiple of 8
  long long b_rows;           // rows of B that hold data, <= k
  // FILTER: a byte per block of A's storage, row-major with mask_stride bytes a row; block
  // (i, j) covers storage rows [i * mask_block_rows, ...) and columns [j * mask_block_cols, ...).
  // A K slice whose blocks are all 0 is known to be zero and skipped.
  long long mask_stride;
  int mask_block_rows;
  int mask_block_cols;
};

// The kernel's parameter: the arguments and, for the TMA-fed Hopper loop (TMA), the tensor maps
// of A's storage, of B, of the addend and of a 16-bit output, encoded by the host for each launch
// (runtime/ops/tensor_maps.cpp), and the split of its tiles among the blocks
// (templates/common/stream_k.cuh); unused (zeros) otherwise.
struct GemmParams {
  GemmArgs args;
  // A's storage: A^T in 64 x 64 boxes, or A [m][k] in boxes of the tile's rows, and (a_tail_map) of
  // a shorter last row tile's, a_tail_box_rows (templates/common/row_tile_box.cuh).
  TmaDescriptor a_map;
  TmaDescriptor a_tail_map;
  TmaDescriptor b_map;
  // The addend's map, when stage_addend: the addend tile is then brought into the ring by TMA
  // after the tile's K slices (templates/gemm/gemm_staged_addend.cuh); otherwise the epilogue
  // reads it from global memory.
  TmaDescriptor addend_map;
  // A 16-bit output's map ([m][n] at out), written in 16 x 64 boxes
  // (templates/common/fragment_box_store.cuh).
  TmaDescriptor out_map;
  int stage_addend;
  int a_tail_box_rows;
  StreamKPlan split;
};

}  // namespace kernels
}  // namespace shardjit
