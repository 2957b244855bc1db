// Launch shape and dynamic shared-memory layout of linear_logp_bwd_dz
// (templates/linear_logp/bwd_dz.cuh) and linear_logp_bwd_dz_hopper (bwd_dz_hopper.cuh). Read by the host (plain C++) to size the launch and by the
// kernel to place its buffers; only built-in types and constexpr functions appear here.
//
// Layout, from the start of dynamic shared memory (every offset a multiple of 16 bytes):
//   stages x { X tile [bm][bk], W tile [bn][bk] }   elements, swizzled, filled by cp.async (the
//                                                    portable loops) or TMA (the Hopper loop)
// then, on the portable loops, the shared-memory epilogue's (DzEpilogue) region:
//   logit tile [bm][cols + 8]                        fp32 accumulators of `cols` columns of the
//                                                    tile (see logit_chunk_cols)
//   row coefficients [bm] BwdRow                     lse, the dZ coefficients, target column
//   tile max (16 bytes)                              FILTER: the largest |dZ| of the tile
// and on the Hopper loop (templates/linear_logp/bwd_dz_hopper.cuh):
//   2 x stages mbarriers                             the TMA ring's full and empty barriers
//   two tile max (16 bytes)                          FILTER, used by the computed tiles in turn
//   staging (kFragmentStagingBytes, on a 1024-byte   the register epilogue's (DzFragmentEpilogue)
//   boundary)                                        rows or boxes on their way out
#pragma once

#include "common/fragment_store_layout.cuh"
#include "common/host_device.cuh"
#include "common/tma_ring_layout.cuh"
#include "linear_logp/logit_block_shape.cuh"

namespace shardjit {
namespace kernels {

constexpr int linear_logp_bwd_dz_threads = 256;

// The kept chunk's dZ kernel (templates/linear_logp/bwd_kept_dz.cuh): blocks of a row's columns,
// eight columns a thread.
constexpr int linear_logp_bwd_kept_dz_threads = 256;
constexpr int kKeptDzBlockCols = linear_logp_bwd_kept_dz_threads * 8;
// Blocks that share out the rows of a call of fewer rows than multiprocessors, per multiprocessor.
constexpr long long kKeptDzBlocksPerMultiprocessor = 8;

// How many blocks share a row (the grid's y): one where the rows give every multiprocessor a block
// of their own; for fewer rows, kKeptDzBlocksPerMultiprocessor blocks a multiprocessor in all, up
// to one for each kKeptDzBlockCols of the chunk's columns (padded or not: the same count,
// kKeptDzBlockCols being a multiple of 8). At 7 rows on an H200 one block a row walked 128 256
// columns in 63 passes, a read and a write of 1.8 MB in 34.6 us (3.6 us shared out). Sharing
// also sped the kernel up at 256 rows (47 -> 40 us), but grad_hidden's GEMM after it then ran
// about 40 us longer in the op's sequence, though not under ncu's replay (docs/benchmarks.md,
// "The addend branch (one call site everywhere again), and the kept chunk's dZ at few rows").
SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_kept_dz_row_blocks(long long rows, int chunk_cols,
                                                                      int multiprocessors) {
  if (rows >= multiprocessors) return 1;
  const long long per_row = (chunk_cols + kKeptDzBlockCols - 1) / kKeptDzBlockCols;
  const long long wanted = (kKeptDzBlocksPerMultiprocessor * multiprocessors + rows - 1) / rows;
  const long long blocks = per_row < wanted ? per_row : wanted;
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

// The Hopper loop adds the producer warpgroup of its TMA ring (templates/common/tma_ring.cuh).
SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_block_threads(bool wgmma) {
  return wgmma ? kTmaRingBlockThreads : linear_logp_bwd_dz_threads;
}

// What the epilogue needs of a row: with p = exp(z[v] - lse),
//   dZ[v] = p * (coef_p + coef_z * (z[v] - lse)) + (v == target ? coef_t : 0),
// the coef_z term only where the call passes grad_entropy (args.grad_entropy).
struct BwdRow {
  float lse;
  float coef_t;  // g * s / T
  float coef_p;  // (h - g - e H) * s / T
  float coef_z;  // -e * s / T
  int target;    // shard column of the target, -1 when elsewhere, -2 for a row without gradient
};

SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_logit_ld(int cols) { return cols + 8; }

SHARDJIT_HOST_DEVICE constexpr int
linear_logp_bwd_dz_ring_bytes(int elem_bytes, int bm, int bn, int bk, int stages) {
  return stages * (bm + bn) * bk * elem_bytes;
}

// Offsets of the shared-memory epilogue's buffers from the start of the region (the logit tile
// at 0).
SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_rows_offset(int bm, int bn) {
  return bm * linear_logp_bwd_dz_logit_ld(logit_chunk_cols(bm, bn)) * 4;
}

SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_max_offset(int bm, int bn) {
  return linear_logp_bwd_dz_rows_offset(bm, bn) + (bm * static_cast<int>(sizeof(BwdRow)) + 15) / 16 * 16;
}

// Dynamic shared memory of one block: the host launches with exactly this many bytes.
// The Hopper loop (register epilogue, templates/linear_logp/bwd_dz_hopper.cuh): the TMA ring,
// its 2 x stages mbarriers, the epilogue's region (two tile max) and its staging area
// (kFragmentStagingBytes, templates/common/fragment_store_layout.cuh).
// The portable loops: the cp.async ring, then the logit tile, the rows and the tile max.
constexpr int linear_logp_bwd_dz_hopper_region_bytes = 16;

SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_region_offset(int elem_bytes, int bm, int bn, int bk, int stages,
                                                                   bool register_epilogue) {
  return linear_logp_bwd_dz_ring_bytes(elem_bytes, bm, bn, bk, stages) +
         (register_epilogue ? tma_ring_barrier_bytes(stages) : 0);
}

// The Hopper loop's staging area: on the next 1024-byte boundary after the region, as the 128-byte
// swizzle of a 16-bit dZ's boxes needs (templates/common/fragment_box_store.cuh).
SHARDJIT_HOST_DEVICE constexpr int linear_logp_bwd_dz_staging_offset(int elem_bytes, int bm, int bn, int bk,
                                                                    int stages) {
  return (linear_logp_bwd_dz_region_offset(elem_bytes, bm, bn, bk, stages, true) +
          linear_logp_bwd_dz_hopper_region_bytes + 1023) /
         1024 * 1024;
}

SHARDJIT_HOST_DEVICE constexpr int
linear_logp_bwd_dz_smem_bytes(int elem_bytes, int bm, int bn, int bk, int stages, bool register_epilogue) {
  return register_epilogue ? linear_logp_bwd_dz_staging_offset(elem_bytes, bm, bn, bk, stages) + kFragmentStagingBytes
                           : linear_logp_bwd_dz_region_offset(elem_bytes, bm, bn, bk, stages, false) +
                                 linear_logp_bwd_dz_max_offset(bm, bn) + 16;
}

}  // namespace kernels
}  // namespace shardjit
