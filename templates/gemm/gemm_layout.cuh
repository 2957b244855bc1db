// Launch shape and dynamic shared-memory layout of the GEMM kernel (templates/gemm/gemm.cuh).
// Read by the host (plain C++) to size the launch and by the kernel to place its buffers, so
// both agree by construction; only built-in types and constexpr functions appear here.
//
// Layout: stages x { A tile, B tile }, each a BM x BK (A) and BK x BN (B) block of elements,
// swizzled and filled by cp.async, or by TMA (TMA), then for TMA a full and an empty mbarrier a
// stage and, for a 16-bit output, the epilogue's staging area (kFragmentStagingBytes,
// templates/common/fragment_store_layout.cuh). Every offset is a multiple of 16 bytes.
#pragma once

#include "common/fragment_store_layout.cuh"
#include "common/host_device.cuh"
#include "common/tma_ring_layout.cuh"

namespace shardjit {
namespace kernels {

constexpr int gemm_threads = 256;

// The TMA-fed loop (templates/gemm/gemm_tma.cuh): the two compute warpgroups and a producer
// warpgroup (templates/common/tma_ring.cuh).
SHARDJIT_HOST_DEVICE constexpr int gemm_block_threads(bool tma) { return tma ? kTmaRingBlockThreads : gemm_threads; }

SHARDJIT_HOST_DEVICE constexpr int gemm_a_tile_bytes(int a_elem_bytes, int bm, int bk) {
  return bm * bk * a_elem_bytes;
}

SHARDJIT_HOST_DEVICE constexpr int
gemm_stage_bytes(int a_elem_bytes, int b_elem_bytes, int bm, int bn, int bk) {
  return gemm_a_tile_bytes(a_elem_bytes, bm, bk) + bk * bn * b_elem_bytes;
}

// Where the TMA loop's ring and its mbarriers end.
SHARDJIT_HOST_DEVICE constexpr int
gemm_tma_ring_end(int a_elem_bytes, int b_elem_bytes, int bm, int bn, int bk, int stages) {
  return stages * gemm_stage_bytes(a_elem_bytes, b_elem_bytes, bm, bn, bk) + tma_ring_barrier_bytes(stages);
}

// Where the TMA loop's staging area starts: on the first 1024-byte boundary after the ring's
// end, as the 128-byte swizzle of the output's boxes needs.
SHARDJIT_HOST_DEVICE constexpr int
gemm_tma_staging_offset(int a_elem_bytes, int b_elem_bytes, int bm, int bn, int bk, int stages) {
  return (gemm_tma_ring_end(a_elem_bytes, b_elem_bytes, bm, bn, bk, stages) + 1023) / 1024 * 1024;
}

// Whether the TMA loop stages its output tile (GemmEpilogue::write_tile): 16-bit outputs only, and
// not in the tiles that take the rows as N (stored from the registers).
SHARDJIT_HOST_DEVICE constexpr bool gemm_tma_stages_output(int out_elem_bytes, bool rows_as_n = false) {
  return out_elem_bytes == 2 && !rows_as_n;
}

// Dynamic shared memory of one block: the host launches with exactly this many bytes. A stage of
// a tile that takes the rows as N (bm output rows by bn = 128 columns) holds B's 128 columns and
// A's bm rows, as bm x bk plus bk x bn elements does.
SHARDJIT_HOST_DEVICE constexpr int gemm_smem_bytes(int a_elem_bytes, int b_elem_bytes, int out_elem_bytes, int bm,
                                                   int bn, int bk, int stages, bool tma, bool rows_as_n = false) {
  if (!tma) return stages * gemm_stage_bytes(a_elem_bytes, b_elem_bytes, bm, bn, bk);
  return gemm_tma_stages_output(out_elem_bytes, rows_as_n)
             ? gemm_tma_staging_offset(a_elem_bytes, b_elem_bytes, bm, bn, bk, stages) + kFragmentStagingBytes
             : gemm_tma_ring_end(a_elem_bytes, b_elem_bytes, bm, bn, bk, stages);
}

}  // namespace kernels
}  // namespace shardjit
