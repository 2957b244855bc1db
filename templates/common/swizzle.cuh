// XOR swizzle of shared-memory tiles whose rows are K-contiguous and are read 16 bytes at a time
// down a column of rows (ldmatrix, or vector loads of 8 consecutive rows). Shared memory has 32
// banks of 4 bytes, so one 128-byte line holds 8 chunks of 16 bytes; reading the same logical
// chunk of 8 consecutive rows is conflict free only if those 8 reads land in 8 different chunk
// slots of the line. The writer (cp.async) and every reader must use this same function.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Index, in 16-byte chunks from the tile start, of logical chunk `chunk` of row `row`, for rows
// of CHUNKS_PER_ROW chunks (4: 64-byte rows, two per line; 8: one line; 16: two lines).
template <int CHUNKS_PER_ROW>
SHARDJIT_HOST_DEVICE inline int swizzled_chunk(int row, int chunk) {
  static_assert(CHUNKS_PER_ROW == 4 || CHUNKS_PER_ROW == 8 || CHUNKS_PER_ROW == 16,
                "rows must be 64, 128 or 256 bytes");
  // Rows sharing one 128-byte line already differ in their line half, so only the rows of
  // different lines need different slots.
  constexpr int kRowsPerLine = CHUNKS_PER_ROW >= 8 ? 1 : 8 / CHUNKS_PER_ROW;
  constexpr int kSlotMask = (CHUNKS_PER_ROW >= 8 ? 8 : CHUNKS_PER_ROW) - 1;
  return row * CHUNKS_PER_ROW + (chunk ^ ((row / kRowsPerLine) & kSlotMask));
}

// As swizzled_chunk, for rows of 2, 4 or any multiple of 8 chunks: tiles stored with M or N
// contiguous have rows as long as the block tile is wide (256 bf16 elements: 32 chunks). Rows of
// more than one 128-byte line are stored as groups of 8 rows, each group as 128-byte-wide panels
// of 8 rows x 8 chunks (1024 bytes) side by side: chunk c of row r lies in panel c / 8 of group
// r / 8, at slot (c % 8) ^ (r % 8) of its line. A panel is then exactly the 128-byte swizzle atom
// of wgmma's M / N contiguous operands (panels 1024 bytes apart, 8-row groups 16 x CHUNKS_PER_ROW
// bytes apart; templates/common/wgmma_mainloop.cuh), and reading one logical chunk down 8
// consecutive rows still lands in 8 different slots. Where both are defined (8 chunks a row) the
// two functions give the same index.
template <int CHUNKS_PER_ROW>
SHARDJIT_HOST_DEVICE inline int swizzled_chunk_any(int row, int chunk) {
  static_assert(CHUNKS_PER_ROW == 2 || CHUNKS_PER_ROW == 4 || CHUNKS_PER_ROW % 8 == 0,
                "rows must be 32, 64 or a multiple of 128 bytes");
  if constexpr (CHUNKS_PER_ROW < 8) {
    constexpr int kRowsPerLine = 8 / CHUNKS_PER_ROW;
    return row * CHUNKS_PER_ROW + (chunk ^ ((row / kRowsPerLine) & (CHUNKS_PER_ROW - 1)));
  } else {
    // Rows and chunks are never negative: shifts and masks are the divisions.
    return (row >> 3) * (8 * CHUNKS_PER_ROW) + (chunk >> 3) * 64 + (row & 7) * 8 + ((chunk & 7) ^ (row & 7));
  }
}

}  // namespace kernels
}  // namespace shardjit
