// Launch shape and dynamic shared-memory layout of the forward kernels: linear_logp_fwd
// (templates/linear_logp/fwd.cuh), linear_logp_fwd_hopper and linear_logp_fwd_rows_as_n
// (fwd_hopper.cuh; the latter's stage holds W's tile first, its rows' targets follow the
// mbarriers and its fold merges in the ring's first stage: linear_logp_fwd_rows_as_n_smem_bytes).
// Read by the host (plain C++) to size the launch and by the kernel to place its buffers, so
// both agree by construction; only built-in types and constexpr functions appear here.
//
// Layout, from the start of dynamic shared memory (every offset a multiple of 16 bytes):
//   stages x { X tile [bm][bk], W tile [bn][bk] }   elements, swizzled, filled by cp.async (the
//                                                    portable loops) or TMA (the Hopper loop)
// then, on the Hopper loop (linear_logp_fwd_hopper), whose epilogue works on the
// accumulators in registers:
//   2 x stages mbarriers                             the TMA ring's full and empty barriers
// and on the portable loops, for the epilogue that takes the tile through shared memory
// (LogpEpilogue):
//   logit tile [bm][cols + pad]                      fp32 accumulators of `cols` columns of one
//                                                    vocabulary tile (see logit_chunk_cols)
//   running statistics [bm] RowPartial               per row of the row tile
//   target columns [bm] int                          the row's target in shard columns, or -1
#pragma once

#include "common/host_device.cuh"
#include "common/tma_ring_layout.cuh"
#include "linear_logp/logit_block_shape.cuh"

namespace shardjit {
namespace kernels {

constexpr int linear_logp_fwd_threads = 256;

// The Hopper loop adds the producer warpgroup of its TMA ring (templates/common/tma_ring.cuh).
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_block_threads(bool wgmma) {
  return wgmma ? kTmaRingBlockThreads : linear_logp_fwd_threads;
}

// Eight floats of padding shift consecutive logit rows by 8 banks, so the mma accumulator
// stores (8 rows x 8 columns per half warp, 2 floats each) hit 32 different banks.
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_logit_ld(int cols) { return cols + 8; }

SHARDJIT_HOST_DEVICE constexpr int
linear_logp_fwd_stage_bytes(int elem_bytes, int bm, int bn, int bk) {
  return (bm + bn) * bk * elem_bytes;
}

SHARDJIT_HOST_DEVICE constexpr int
linear_logp_fwd_ring_bytes(int elem_bytes, int bm, int bn, int bk, int stages) {
  return stages * linear_logp_fwd_stage_bytes(elem_bytes, bm, bn, bk);
}

// Offsets inside the shared-memory epilogue's region, which starts where the ring ends.
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_stats_offset(int bm, int bn) {
  return bm * linear_logp_fwd_logit_ld(logit_chunk_cols(bm, bn)) * 4;
}

// RowPartial is four floats.
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_target_offset(int bm, int bn) {
  return linear_logp_fwd_stats_offset(bm, bn) + bm * 16;
}

// What follows the ring: the TMA ring's mbarriers on the Hopper loop (wgmma), else the
// shared-memory epilogue's region.
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_epilogue_bytes(int bm, int bn, int stages, bool wgmma) {
  return wgmma ? tma_ring_barrier_bytes(stages) : linear_logp_fwd_target_offset(bm, bn) + bm * 4;
}

// Dynamic shared memory of one block: the host launches with exactly this many bytes.
// wgmma: the Hopper loop's kernel (linear_logp_fwd_hopper).
SHARDJIT_HOST_DEVICE constexpr int
linear_logp_fwd_smem_bytes(int elem_bytes, int bm, int bn, int bk, int stages, bool wgmma) {
  return linear_logp_fwd_ring_bytes(elem_bytes, bm, bn, bk, stages) +
         linear_logp_fwd_epilogue_bytes(bm, bn, stages, wgmma);
}

// The tiles of the rows as N (linear_logp_fwd_rows_as_n) keep, after the ring and its mbarriers,
// the length of a list of up to bm target entries (16 bytes with its padding), the bm rows' target
// logits, and the entries' columns (4 bytes) and rows (1); their merge puts eight warps' base-2
// statistics of each row in the ring's first stage (LogpColumnFoldEpilogue, fwd_column_fold.cuh).
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_column_fold_bytes(int bm) { return (16 + bm * 9 + 15) / 16 * 16; }
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_column_fold_merge_bytes(int bm) { return 8 * bm * 12; }

// Then the kept chunk's row maxima where the kernel keeps it (KeptColumnTiles,
// fwd_column_keep.cuh): three sets of bm keys. Its maxima go by the tile's 128 columns. Every
// rows-as-N kernel reserves them (at most 2 KiB): one size serves a tile's kernels with and
// without KEEP, and without them no tile would fit a stage more (fwd_rows_as_n_stages).
constexpr int kKeptColumnTileCols = 128;
SHARDJIT_HOST_DEVICE constexpr int linear_logp_fwd_kept_max_bytes(int bm) { return 3 * bm * 4; }

SHARDJIT_HOST_DEVICE constexpr int
linear_logp_fwd_rows_as_n_smem_bytes(int elem_bytes, int bm, int bn, int bk, int stages) {
  return linear_logp_fwd_smem_bytes(elem_bytes, bm, bn, bk, stages, true) + linear_logp_fwd_column_fold_bytes(bm) +
         linear_logp_fwd_kept_max_bytes(bm);
}

}  // namespace kernels
}  // namespace shardjit
