// The shared-memory tile layouts of templates/common/swizzle.cuh, on the host: every tile is a
// permutation of its chunks; 8 consecutive rows reading one logical chunk hit 8 different slots
// of a 128-byte line (no bank conflicts for ldmatrix); and the layouts are the 128-byte swizzle
// that wgmma's descriptors in templates/common/wgmma_mainloop.cuh name: K contiguous tiles of
// 128-byte rows in 1024-byte atoms of 8 rows, and M / N contiguous tiles as atoms 1024 bytes
// apart along the row with 8-row groups 16 x (row elements) bytes apart.
#include <gtest/gtest.h>

#include <set>

#include "common/swizzle.cuh"

namespace shardjit::kernels {
namespace {

template <int CHUNKS_PER_ROW>
void expect_permutation_and_conflict_free(int rows) {
  std::set<int> seen;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < CHUNKS_PER_ROW; ++c) {
      const int slot = swizzled_chunk_any<CHUNKS_PER_ROW>(r, c);
      EXPECT_GE(slot, 0);
      EXPECT_LT(slot, rows * CHUNKS_PER_ROW);
      seen.insert(slot);
    }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(rows * CHUNKS_PER_ROW)) << CHUNKS_PER_ROW << " chunks a row";
  // 8 consecutive rows (from a multiple of 8), one logical chunk: 8 different 16-byte slots of
  // their 128-byte lines.
  for (int r0 = 0; r0 < rows; r0 += 8)
    for (int c = 0; c < CHUNKS_PER_ROW; ++c) {
      std::set<int> slots;
      for (int r = r0; r < r0 + 8; ++r) slots.insert(swizzled_chunk_any<CHUNKS_PER_ROW>(r, c) % 8);
      EXPECT_EQ(slots.size(), 8u) << "rows " << r0 << "+, chunk " << c << ", " << CHUNKS_PER_ROW << " chunks a row";
    }
}

TEST(Swizzle, EveryTileIsAConflictFreePermutation) {
  expect_permutation_and_conflict_free<2>(64);
  expect_permutation_and_conflict_free<4>(64);
  expect_permutation_and_conflict_free<8>(128);
  expect_permutation_and_conflict_free<16>(64);
  expect_permutation_and_conflict_free<32>(64);
}

TEST(Swizzle, RowsOfOneLineAreTheSameInBothFunctions) {
  for (int r = 0; r < 256; ++r)
    for (int c = 0; c < 8; ++c) EXPECT_EQ(swizzled_chunk_any<8>(r, c), swizzled_chunk<8>(r, c));
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(swizzled_chunk_any<4>(r, c), swizzled_chunk<4>(r, c));
}

// Byte offset of 16-bit element (row, col) in the 128-byte swizzle of the PTX ISA for an operand
// whose atoms are `atom_stride` bytes apart along the row and whose 8-row groups are
// `group_stride` bytes apart: inside an atom, row r % 8 at 128 (r % 8) bytes, its chunk j at slot
// j ^ (r % 8).
int wgmma_128b_offset(int row, int col, int atom_stride, int group_stride) {
  const int chunk = col / 8;
  return (row / 8) * group_stride + (chunk / 8) * atom_stride + (row % 8) * 128 + ((chunk % 8) ^ (row % 8)) * 16 +
         (col % 8) * 2;
}

int tile_offset_any(int chunks_per_row, int row, int col) {
  const int chunk = col / 8;
  int slot = 0;
  switch (chunks_per_row) {
    case 8: slot = swizzled_chunk_any<8>(row, chunk); break;
    case 16: slot = swizzled_chunk_any<16>(row, chunk); break;
    case 32: slot = swizzled_chunk_any<32>(row, chunk); break;
    default: ADD_FAILURE() << chunks_per_row;
  }
  return slot * 16 + (col % 8) * 2;
}

TEST(Swizzle, TilesAreWgmmaSwizzleAtoms) {
  // K contiguous, [rows][64]: 128-byte rows, 8-row groups 1024 bytes apart (the descriptor's
  // stride byte offset), one atom a row.
  for (int r = 0; r < 256; ++r)
    for (int k = 0; k < 64; ++k) EXPECT_EQ(tile_offset_any(8, r, k), wgmma_128b_offset(r, k, 0, 1024)) << r << "," << k;
  // M / N contiguous, [64 K rows][extent]: atoms 1024 bytes apart along M / N (leading byte
  // offset), 8-K-row groups 16 x extent bytes apart (stride byte offset).
  for (int extent : {128, 256}) {
    for (int k = 0; k < 64; ++k)
      for (int m = 0; m < extent; ++m) {
        EXPECT_EQ(tile_offset_any(extent / 8, k, m), wgmma_128b_offset(k, m, 1024, 16 * extent))
            << extent << ": " << k << "," << m;
      }
  }
}

}  // namespace
}  // namespace shardjit::kernels
