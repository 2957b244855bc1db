#include "runtime/ops/logit_tensor_maps.hpp"

#include <cuda.h>

#include <algorithm>

#include "common/tma_ring_layout.cuh"
#include "runtime/driver/cuda_driver.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

static_assert(sizeof(CUtensorMap) == sizeof(kernels::TmaDescriptor) &&
                  alignof(CUtensorMap) == alignof(kernels::TmaDescriptor),
              "TmaDescriptor holds a CUtensorMap");

// A row-major [rows][cols] tensor read in boxes of box_rows x box_cols. A tensor of no rows is
// described as one row: the kernels read none of it then, but the driver wants every extent >= 1.
void encode_2d(kernels::TmaDescriptor& map, DType dtype, const void* base, std::int64_t rows, std::int64_t cols,
               std::int64_t row_stride, int box_rows, int box_cols) {
  const cuuint64_t extent[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(std::max<std::int64_t>(rows, 1))};
  const cuuint64_t stride_bytes[1] = {static_cast<cuuint64_t>(row_stride) * dtype_size(dtype)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  SHARDJIT_CU(cuTensorMapEncodeTiled(
      reinterpret_cast<CUtensorMap*>(&map),
      dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(base), extent, stride_bytes, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

}  // namespace

void encode_logit_tensor_maps(const LogitOperands& operands, const FwdTile& tile, kernels::TmaDescriptor& x_map,
                              kernels::TmaDescriptor& w_map) {
  if (!tile.wgmma || (operands.dtype != DType::kBF16 && operands.dtype != DType::kFP16)) {
    throw Error(ErrorCode::kInternal, "TMA maps are for the Hopper main loop's 16-bit tiles only");
  }
  encode_2d(x_map, operands.dtype, operands.hidden, operands.n_rows, operands.hidden_size, operands.hidden_stride,
            tile.bm, tile.bk);
  encode_2d(w_map, operands.dtype, operands.weight, operands.weight_rows, operands.hidden_size, operands.weight_stride,
            tile.bn / kernels::kTmaClusterBlocks, tile.bk);
}

}  // namespace shardjit
