// Writes a finished 16-bit tile of the Hopper main loop (WgmmaTileMainloop's fragment layout) to
// global memory through a tensor map: FragmentTileStore's job (templates/common/fragment_store.cuh)
// with one TMA store a box instead of one bulk copy a row.
//
// Each warp stages its 16 rows of a column part as boxes of 16 rows x 64 columns (128 bytes a
// row) in the 128-byte swizzle (the 16-byte chunk c of row r at chunk c ^ (r % 8)), so that the
// eight rows of a stmatrix matrix fall in different banks without padding, and one lane writes
// each box with cp.async.bulk.tensor. A 128 x 256 tile is 32 box stores where the row copies
// are 256; what lies outside the map's tensor (rows past the matrix, columns past its width) is
// left out by the TMA unit.
//
// The tile goes out in PARTS column parts through kBytes of staging (1024-byte aligned, as the
// swizzle needs); a part waits until the stores of the last one have read the staging before it
// writes it. Stores may still read the staging when store returns: wait_reads before anything
// else writes it, or before the block exits.
#pragma once

#include "common/ptx.cuh"
#include "common/ptx_bulk.cuh"
#include "common/ptx_tma.cuh"
#include "common/ptx_wgmma.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <class OutT, class Mainloop, int PARTS>
struct FragmentTileBoxStore {
  static_assert(sizeof(OutT) == 2, "16-bit outputs: a box row is 64 of them");
  static constexpr int kPartGroups = Mainloop::kColumnGroups / PARTS;
  static_assert(kPartGroups % 8 == 0, "a part is whole boxes of 64 columns");
  static constexpr int kBoxGroups = 8;     // 64 columns of 8
  static constexpr int kBoxRows = 16;      // a warp's rows
  static constexpr int kBoxBytes = kBoxRows * 128;
  static constexpr int kPartBoxes = kPartGroups / kBoxGroups;
  static constexpr int kWarpBytes = kPartBoxes * kBoxBytes;
  static constexpr int kBytes = Mainloop::kTileRows / kBoxRows * kWarpBytes;

  // Writes the tile whose element (0, 0) is element (x0, y0) of the map's tensor (x along its
  // rows) through the staging area at `staging`. Before a part is staged, `prepare(first, count)`
  // may still compute its values, those of column groups [first, first + count): it runs before
  // the wait for the previous part's stores, beside them.
  template <class Prepare>
  static __device__ __forceinline__ void store(float* values, unsigned char* staging, const TmaDescriptor* map,
                                               int x0, long long y0, int warp, int lane, Prepare&& prepare) {
    const int warp_row0 = Mainloop::fragment_row(warp, 0, 0);
    const unsigned int warp_staging = smem_addr(staging) + static_cast<unsigned int>(warp) * kWarpBytes;
#pragma unroll
    for (int part = 0; part < PARTS; ++part) {
      prepare(part * kPartGroups, kPartGroups);
      wait_reads(lane);
      stage_part(values + 4 * part * kPartGroups, warp_staging, lane);
      fence_proxy_async_shared();
      __syncwarp();
      if (lane == 0) {
#pragma unroll
        for (int b = 0; b < kPartBoxes; ++b) {
          tma_store_2d(map, x0 + (part * kPartBoxes + b) * 64, static_cast<int>(y0 + warp_row0),
                       warp_staging + b * kBoxBytes);
        }
        bulk_commit_group();
      }
    }
  }

  // Waits until this warp's stores have read its staging (lane 0 issued them).
  static __device__ __forceinline__ void wait_reads(int lane) {
    if (lane == 0) bulk_wait_group_read_all();
    __syncwarp();
  }

 private:
  // The warp's 16 rows of one part's column groups into its boxes. Matrix m of an instruction
  // covering column groups g and g + 1: rows 8 (m % 2) of the warp's 16, columns of group
  // g + m / 2; lane l addresses row l % 8 of matrix l / 8.
  static __device__ __forceinline__ void stage_part(const float* values, unsigned int warp_staging, int lane) {
    const int m = lane / 8;
    const int row = (m % 2) * 8 + lane % 8;
    const unsigned int row_base = warp_staging + static_cast<unsigned int>(row) * 128u;
#pragma unroll
    for (int g = 0; g < kPartGroups; g += 2) {
      const int group = g + m / 2;
      const int box = group / kBoxGroups;
      const int chunk = (group % kBoxGroups) ^ (row % 8);
      const float* const v = values + 4 * g;
      stmatrix_x4(row_base + static_cast<unsigned int>(box * kBoxBytes + chunk * 16), pack_pair<OutT>(v[0], v[1]),
                  pack_pair<OutT>(v[2], v[3]), pack_pair<OutT>(v[4], v[5]), pack_pair<OutT>(v[6], v[7]));
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
