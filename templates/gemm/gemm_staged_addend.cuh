// The GEMM's addend tile brought into the TMA ring (templates/common/tma_ring.cuh) after the
// tile's K slices, so that the epilogue reads it from shared memory instead of waiting on global
// loads while the tensor cores idle.
//
// The producer loads it as soon as the ring frees the stages of the tile's last slices, while the
// compute warps still multiply those slices: BM-row boxes 128 bytes wide (32 fp32 or 64 16-bit
// columns) with the 128-byte swizzle, three 16 KiB boxes a 48 KiB stage, so a 128 x 256 tile
// takes kStages stages (three for fp32, two for 16-bit). The compute warps acquire the stages
// after their products, read their pairs and release them.
//
// The 128-byte swizzle keeps the epilogue's reads free of bank conflicts: for each pair index a
// warp reads 8 columns of 8 rows, rows 128 bytes apart, and the swizzle puts the 8 rows' 16-byte
// chunks in 8 different places.
#pragma once

#include "common/ptx.cuh"
#include "common/ptx_tma.cuh"
#include "common/tma_descriptor.cuh"
#include "common/types.cuh"
#include "gemm/gemm_epilogue.cuh"

namespace shardjit {
namespace kernels {

template <class AddT, int BM, int BN, unsigned int STAGE_BYTES>
struct StagedAddend {
  static constexpr int kElem = static_cast<int>(sizeof(AddT));
  static constexpr int kBoxCols = 128 / kElem;
  static constexpr unsigned int kBoxBytes = BM * 128;
  static constexpr int kBoxes = BN / kBoxCols;
  static constexpr int kBoxesPerStage = static_cast<int>(STAGE_BYTES / kBoxBytes);
  static constexpr int kStages = (kBoxes + kBoxesPerStage - 1) / kBoxesPerStage;
  static_assert(BN % kBoxCols == 0 && kBoxesPerStage >= 1, "whole boxes in each stage");
  static_assert(BM <= 256, "a box has at most 256 rows");

  // Bytes of stage s's boxes (its full barrier's transaction count).
  __device__ static constexpr unsigned int stage_bytes(int s) {
    const int boxes = kBoxes - s * kBoxesPerStage;
    return (boxes < kBoxesPerStage ? boxes : kBoxesPerStage) * kBoxBytes;
  }

  // Producer, one thread: issues stage s's boxes of the tile at (m0, n0) into shared address
  // dst, completing on mbarrier bar.
  __device__ static void load_stage(int s, unsigned int dst, const TmaDescriptor* map, int m0, int n0, unsigned int bar) {
#pragma unroll
    for (int j = 0; j < kBoxesPerStage; ++j) {
      const int box = s * kBoxesPerStage + j;
      if (box < kBoxes) tma_load_2d(dst + j * kBoxBytes, map, n0 + box * kBoxCols, m0, bar);
    }
  }

  const unsigned char* stage[kStages];  // the stages holding the tile, in order

  // Tile element (row, col) and the one after it, as floats, for col = group_col + lane_col:
  // group_col a multiple of 8 (a compile-time value in the caller's unrolled loop, which picks the
  // stage) and lane_col < 8 (the pair within the group, as in the wgmma fragment layout).
  __device__ __forceinline__ float2 pair(int row, int group_col, int lane_col) const {
    const int box = group_col / kBoxCols;
    const int byte = (group_col % kBoxCols + lane_col) * kElem;
    // The 128-byte swizzle: the 16-byte chunk of a row XOR the row's index mod 8.
    const int chunk = (byte / 16) ^ (row % 8);
    const unsigned char* const p =
        stage[box / kBoxesPerStage] + (box % kBoxesPerStage) * kBoxBytes + row * 128 + chunk * 16 + byte % 16;
    return load_pair(reinterpret_cast<const AddT*>(p));
  }
};

}  // namespace kernels
}  // namespace shardjit
