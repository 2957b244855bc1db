#include "runtime/ops/tensor_maps.hpp"

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "runtime/driver/cuda_driver.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(kernels::TmaDescriptor) &&
                  alignof(CUtensorMap) == alignof(kernels::TmaDescriptor),
              "TmaDescriptor holds a CUtensorMap");

// The loops' boxes: 128 bytes along the contiguous dimension (64 16-bit elements, 32 fp32), the
// 128-byte swizzle's row, by as many rows as the tile has (at most 256, TMA's limit).
constexpr int kBoxBytes = 128;

void check_dtype(DType dtype, const char* what) {
  if (dtype != DType::kBF16 && dtype != DType::kFP16) {
    throw Error(ErrorCode::kInternal,
                std::string(what) + " TMA maps take bf16 or fp16 operands, not " + dtype_name(dtype));
  }
}

CUtensorMapDataType tma_data_type(DType dtype) {
  if (dtype == DType::kBF16) return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  if (dtype == DType::kFP16) return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  if (dtype == DType::kFP32) return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  throw Error(ErrorCode::kInternal, std::string("no TMA data type for ") + dtype_name(dtype));
}

// A row-major [rows][cols] tensor read in boxes of box_rows x 128 bytes. A tensor of no rows is
// described as one row (the driver wants every extent >= 1); the callers then read none of it.
void encode_2d(kernels::TmaDescriptor& map, DType dtype, const void* base, std::int64_t rows, std::int64_t cols,
               std::int64_t row_stride, int box_rows) {
  const cuuint64_t extent[2] = {static_cast<cuuint64_t>(std::max<std::int64_t>(cols, 1)),
                                static_cast<cuuint64_t>(std::max<std::int64_t>(rows, 1))};
  const cuuint64_t stride_bytes[1] = {static_cast<cuuint64_t>(row_stride) * dtype_size(dtype)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kBoxBytes / dtype_size(dtype)), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  SHARDJIT_CU(cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(&map), tma_data_type(dtype), 2,
                                     const_cast<void*>(base), extent, stride_bytes, box, element_strides,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

// A row-major operand [rows][cols] read in row tiles of bm rows (templates/common/row_tile_box.cuh):
// `whole` in boxes of bm rows, for the whole tiles, and `tail` in boxes of the last tile's rows
// rounded up to 8 (tail_box_rows), returned. Where no tile is shorter, or none is whole, the two
// maps are the same.
int encode_row_tiles(kernels::TmaDescriptor& whole, kernels::TmaDescriptor& tail, DType dtype, const void* base,
                     std::int64_t rows, std::int64_t cols, std::int64_t row_stride, int bm) {
  const int tail_rows = tail_box_rows(rows, bm);
  encode_2d(tail, dtype, base, rows, cols, row_stride, tail_rows);
  whole = tail;
  if (tail_rows != bm && rows > bm) encode_2d(whole, dtype, base, rows, cols, row_stride, bm);
  return tail_rows;
}

// X [x_rows][H] in row tiles of bm rows (x_map, x_tail_map, x_tail_box_rows) and W's valid rows
// [V_VALID][H] in boxes of bn, for a kernel that computes logit tiles on the Hopper loop (the
// forward's and the dZ kernel's parameters name them alike).
template <class Params>
void encode_logit_maps(Params& params, DType dtype, std::int64_t h, std::int64_t v_valid, std::int64_t x_rows, int bm,
                       int bn, const char* what) {
  check_dtype(dtype, what);
  const auto& args = params.args;
  params.x_tail_box_rows =
      encode_row_tiles(params.x_map, params.x_tail_map, dtype, args.hidden, x_rows, h, args.hidden_stride, bm);
  encode_2d(params.w_map, dtype, args.weight, v_valid, h, args.weight_stride, bn);
}

}  // namespace

int tail_box_rows(std::int64_t rows, int tile_rows) {
  // The last tile's rows, 1 to tile_rows (one for an operand of none, whose box is never read).
  const std::int64_t last = rows <= 0 ? 1 : rows - (rows - 1) / tile_rows * tile_rows;
  return static_cast<int>(std::min<std::int64_t>((last + 7) / 8 * 8, tile_rows));
}

void encode_gemm_tensor_maps(kernels::GemmParams& params, DType dtype, bool a_trans, int bm) {
  check_dtype(dtype, "GEMM");
  const kernels::GemmArgs& args = params.args;
  // A's storage: [k][a_cols] read as A^T in 64 x 64 boxes, or [m][a_cols] in row tiles of bm rows.
  if (a_trans) {
    encode_2d(params.a_map, dtype, args.a, args.k, args.a_cols, args.a_stride, 64);
  } else {
    params.a_tail_box_rows =
        encode_row_tiles(params.a_map, params.a_tail_map, dtype, args.a, args.m, args.a_cols, args.a_stride, bm);
  }
  encode_2d(params.b_map, dtype, args.b, args.b_rows, args.n, args.b_stride, 64);
}

bool encode_gemm_addend_map(kernels::GemmParams& params, DType dtype, int bm) {
  const kernels::GemmArgs& args = params.args;
  const auto base = reinterpret_cast<std::uintptr_t>(args.addend);
  const std::int64_t stride_bytes = args.addend_stride * static_cast<std::int64_t>(dtype_size(dtype));
  if (args.addend == nullptr || base % 16 != 0 || stride_bytes % 16 != 0) return false;
  encode_2d(params.addend_map, dtype, args.addend, args.m, args.n, args.addend_stride, bm);
  return true;
}

void encode_gemm_output_map(kernels::GemmParams& params, DType dtype) {
  check_dtype(dtype, "GEMM output");
  const kernels::GemmArgs& args = params.args;
  encode_2d(params.out_map, dtype, args.out, args.m, args.n, args.out_stride, 16);
}

void encode_dz_tensor_maps(kernels::LinearLogpBwdDzParams& params, DType dtype, std::int64_t h,
                           std::int64_t v_valid, std::int64_t x_rows, int bm, int bn) {
  encode_logit_maps(params, dtype, h, v_valid, x_rows, bm, bn, "dZ kernel");
}

void encode_dz_output_map(kernels::LinearLogpBwdDzParams& params, DType dz) {
  check_dtype(dz, "dZ output");
  const kernels::LinearLogpBwdDzArgs& args = params.args;
  const std::int64_t padded_cols = (args.chunk_cols + 7) / 8 * 8;
  encode_2d(params.dz_map, dz, args.dz, args.n_rows, padded_cols, args.dz_stride, 16);
}

void encode_fwd_tensor_maps(kernels::LinearLogpFwdParams& params, DType dtype, std::int64_t h,
                            std::int64_t v_valid, std::int64_t x_rows, int bm, int bn) {
  encode_logit_maps(params, dtype, h, v_valid, x_rows, bm, bn, "forward");
}

}  // namespace shardjit
