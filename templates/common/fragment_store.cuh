// Writes a finished tile of the Hopper main loop (WgmmaTileMainloop's fragment layout: thread
// (warp, lane) holds values[4 g + 2 h + e] of tile element (fragment_row(warp, lane, h),
// fragment_col(lane, g, e))) to global memory in OutT, through shared memory.
//
// Each warp first puts its 16 rows into a staging tile of kPitch-byte rows: stmatrix for 16-bit
// types (four 8 x 8 matrices an instruction), 8-byte stores for fp32. 16 of its lanes then copy a
// row each to global memory with a bulk copy. Stored straight from the fragments, a warp's store
// instruction would write 4 or 8 bytes a lane, 8 rows' 16 or 32 bytes at a time: 64 store
// instructions a thread a 128 x 256 tile, each touching 8 sectors, with a 64-bit address
// computed for each. The rows are 16 bytes longer than the data (32 for fp32), so that the 8
// rows of a stmatrix matrix, or of an 8-byte store, fall in different banks.
//
// The tile goes out in PARTS column parts, each staged in rows of kPitch bytes, so that the
// staging area (kBytes) can be a fraction of the tile: a part waits until the copies of the last
// one have read the staging rows before it writes them. Copies may still read the staging area
// when store returns; before anything else writes it, or before the block exits, wait_reads.
#pragma once

#include "common/fragment_store_layout.cuh"
#include "common/host_device.cuh"
#include "common/ptx.cuh"
#include "common/ptx_bulk.cuh"
#include "common/ptx_wgmma.cuh"
#include "common/types.cuh"

namespace shardjit {
namespace kernels {

template <class OutT, class Mainloop, int PARTS = 1>
struct FragmentTileStore {
  static_assert(sizeof(OutT) == 2 || sizeof(OutT) == 4, "16-bit or fp32 outputs");
  static_assert(Mainloop::kColumnGroups % (2 * PARTS) == 0, "a part is whole pairs of column groups");
  static constexpr int kElem = static_cast<int>(sizeof(OutT));
  static constexpr int kPartGroups = Mainloop::kColumnGroups / PARTS;
  static constexpr int kPartBytes = kPartGroups * 8 * kElem;
  static constexpr int kPitch = kPartBytes + 8 * kElem;
  static constexpr int kBytes = Mainloop::kTileRows * kPitch;
  static constexpr int kWarpRows = Mainloop::kWarpGroupRows / 4;

  // Writes the tile's first `rows` rows, `row_bytes` bytes of each (a multiple of 16), to `out`
  // (tile element (0, 0); rows `stride` elements apart, a multiple of 16 bytes), through the
  // staging area at `staging` (16-byte aligned). Before a part is staged, `prepare(first, count)`
  // may still compute its values, those of column groups [first, first + count): it runs before
  // the wait for the previous part's copies, beside them.
  template <class Prepare>
  static __device__ __forceinline__ void store(float* values, unsigned char* staging, OutT* out, long long stride,
                                               int rows, int row_bytes, int warp, int lane, Prepare&& prepare) {
    const int warp_row0 = Mainloop::fragment_row(warp, 0, 0);
    unsigned char* const warp_staging = staging + warp_row0 * kPitch;
#pragma unroll
    for (int part = 0; part < PARTS; ++part) {
      const int part_bytes = min_int(kPartBytes, row_bytes - part * kPartBytes);
      if (part_bytes <= 0) break;
      prepare(part * kPartGroups, kPartGroups);
      wait_reads(lane);
      stage_part(values + 4 * part * kPartGroups, warp_staging, lane);
      fence_proxy_async_shared();
      __syncwarp();
      if (lane < kWarpRows && warp_row0 + lane < rows) {
        bulk_copy_shared_to_global(reinterpret_cast<unsigned char*>(out + (warp_row0 + lane) * stride) + part * kPartBytes,
                                   smem_addr(warp_staging + lane * kPitch), static_cast<unsigned int>(part_bytes));
        bulk_commit_group();
      }
    }
  }

  // Waits until this warp's copies have read its staging rows (the lanes that issued them wait,
  // then the warp).
  static __device__ __forceinline__ void wait_reads(int lane) {
    if (lane < kWarpRows) bulk_wait_group_read_all();
    __syncwarp();
  }

 private:
  // The warp's 16 rows of one part's column groups into its staging rows.
  static __device__ __forceinline__ void stage_part(const float* values, unsigned char* warp_staging, int lane) {
    if constexpr (kElem == 2) {
      // Matrix m of an instruction covering column groups g and g + 1: rows 8 (m % 2) of the
      // warp's 16, columns of group g + m / 2; lane l addresses row l % 8 of matrix l / 8.
      const int m = lane / 8;
      const unsigned int base = smem_addr(warp_staging) + ((m % 2) * 8 + lane % 8) * kPitch + (m / 2) * 16;
#pragma unroll
      for (int g = 0; g < kPartGroups; g += 2) {
        const float* const v = values + 4 * g;
        stmatrix_x4(base + g * 16, pack_pair<OutT>(v[0], v[1]), pack_pair<OutT>(v[2], v[3]),
                    pack_pair<OutT>(v[4], v[5]), pack_pair<OutT>(v[6], v[7]));
      }
    } else {
      unsigned char* const thread_staging = warp_staging + (lane / 4) * kPitch + (lane % 4) * 8;
#pragma unroll
      for (int g = 0; g < kPartGroups; ++g)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          *reinterpret_cast<float2*>(thread_staging + h * 8 * kPitch + g * 32) =
              make_float2(values[4 * g + 2 * h], values[4 * g + 2 * h + 1]);
        }
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
