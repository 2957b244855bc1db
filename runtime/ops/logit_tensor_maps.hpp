// TMA maps of the operands of the logit kernels (forward, dZ) on the Hopper path: X [n_rows][H]
// and W [rows][H], row-major 16-bit, read in boxes of one K slice (BK columns, 128 bytes) by the
// 128 rows of the kernels' TMA ring (templates/common/tma_ring.cuh), with the 128-byte swizzle
// that wgmma reads. Encoded on the host for each call (the pointers are the call's), by the
// driver, without touching the device. The view checks that run before guarantee what TMA
// needs: 16-byte aligned bases and row strides.
#pragma once

#include <cstdint>

#include "common/tma_descriptor.cuh"
#include "runtime/ops/linear_logp_fwd.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

struct LogitOperands {
  DType dtype;
  std::int64_t hidden_size;    // H, the K extent of both
  const void* hidden;          // X
  std::int64_t n_rows;
  std::int64_t hidden_stride;  // elements
  const void* weight;          // W: its first `weight_rows` rows are read (the shard's valid columns)
  std::int64_t weight_rows;
  std::int64_t weight_stride;  // elements
};

// For a tile with tile.wgmma; fills both maps.
void encode_logit_tensor_maps(const LogitOperands& operands, const FwdTile& tile, kernels::TmaDescriptor& x_map,
                              kernels::TmaDescriptor& w_map);

}  // namespace shardjit
