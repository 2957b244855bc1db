// Host side of templates/gemm/gemm.cuh: out = alpha * A B + addend with fp32 accumulation, A
// stored [m][k] or transposed [k][m], B stored [k][n]. The backward of LinearLogp builds
// grad_hidden and grad_weight from it.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "gemm/gemm_args.cuh"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/sched/stream_k_workspace.hpp"
#include "shardjit/dtype.hpp"

namespace shardjit {

struct GemmTile {
  int bm = 128;
  int bn = 128;
  int bk = 32;
  int stages = 4;
  // The Hopper main loop (wgmma, sm_90a only; 128 x 256 x 64 tiles of 16-bit operands) instead of
  // the portable one (templates/gemm/gemm_mainloop_mma.cuh).
  bool wgmma = false;
  // With wgmma: the operands copied by TMA from a producer warp (templates/gemm/gemm_tma.cuh)
  // instead of by cp.async from every thread.
  bool tma = false;
  // With tma, of an A [m][k]: tiles of bm output rows by bn = 128 columns that take the rows as
  // wgmma's N (gemm_rows_as_n_tile).
  bool rows_as_n = false;
};

// The output rows of the tiles that take the rows as wgmma's N (kernels exist for these).
constexpr int kGemmRowsAsNRows[] = {160, 192, 224, 256};
// The most rows the rule gives them: two row tiles, the range measured (600 rows' three lost 7 %
// against the usual tiles split in clusters; docs/perf-notes.md, "GEMM tiles of the rows as N").
constexpr std::int64_t kGemmRowsAsNMaxRows = 512;

// The TMA tile of bm output rows by 128 columns with the rows as wgmma's N.
GemmTile gemm_rows_as_n_tile(int bm);

// A K slice's products of a Hopper tile of bm rows as wgmma's N by `cols` columns (wgmma's M, 128
// or 256), in 128 x 256 tiles' time: its share of the products times the shared memory it moves a
// cycle over the 128 bytes a multiprocessor delivers, where it moves more. Each m64 block of the
// columns reads the bm-row B operand: a slice's cols / 64 wgmma of bm / 2 cycles read cols / 64 x
// (8 KiB + bm x 128 bytes), and the ring writes (cols + bm) x 128 bytes, 8192 / bm + 64 + 4096 / cols
// bytes a cycle (128 at 128 x 256 as at 256 x 256; 150 at 152 x 128, 134 at 152 x 256). The GEMM's and
// the forward's tiles of the rows as N (runtime/ops/linear_logp/fwd.hpp, fwd_tile_cost).
double rows_as_n_slice_work(int bm, int cols = 128);

// The rows of the tile that takes the m rows of a product [m x n] over k as wgmma's N, 0 for the
// 128 x 256 tiles: those whose estimate is at least 5 % below the 128 x 256 tiles', or within 5 %
// of it where those are split whole and A (16-bit, m x k) takes more than half of `l2_bytes`
// (their runs start at scattered K offsets and so read A from memory once a column tile, where
// the rows as N read it once); never for m <= 128 (one row tile, whose product reads B at the
// memory's pace either way) nor past kGemmRowsAsNMaxRows. The tile: ceil(m / 256) row tiles of m / tiles rounded
// up to a multiple of 32, at least 160 (kGemmRowsAsNRows). The estimate: the K slices of the
// plan's tiles (as launch_gemm plans them on `resident` blocks by plan_stream_k's rule
// `partial_waves` and `clusters`), in products of a 128 x 256 tile's slice, times the shared-memory
// reads a narrower tile adds (its B operand is read by both warpgroups), over the blocks busy.
// docs/perf-notes.md, "GEMM tiles of the rows as N".
int gemm_rows_as_n_rows(std::int64_t m, std::int64_t n, std::int64_t k, int resident, bool partial_waves,
                        const kernels::StreamKClusters& clusters, std::int64_t l2_bytes);

// The plan of a product [m x n] over k on the tiles of bm rows that take the rows as N, as
// launch_gemm plans it (StreamKWorkspace::rows_as_n) on `resident` blocks: plan_rows_as_n over
// ceil(m / bm) x ceil(n / 128) tiles of ceil(k / 64) K slices (plan.tiles holds their count).
kernels::StreamKPlan gemm_rows_as_n_plan(std::int64_t m, std::int64_t n, std::int64_t k, int bm, int resident,
                                         bool partial_waves, const kernels::StreamKClusters& clusters);

// The blocks a plan keeps busy on average: a plan split whole, its workers (runs of equal length);
// one whose last wave is split, its tiles over its full waves and its runs (every block where the
// runs are as many as the blocks); one of whole tiles, its tiles over its waves.
double gemm_busy_blocks(const kernels::StreamKPlan& plan, int resident);

// What a GEMM kernel is specialized for, besides its tile.
struct GemmKind {
  DType a = DType::kBF16;
  DType b = DType::kBF16;
  DType out = DType::kFP32;
  DType addend = DType::kFP32;  // the addend's type when one is passed at launch
  bool a_trans = false;
  bool filter = false;
};

// Tensor cores (16-bit A and B of one type): on sm_90a with hopper_path (RuntimeConfig,
// SHARDJIT_HOPPER_PATH) the wgmma loop fed by TMA, 128 x 256 x 64 with four stages; elsewhere mma.sync,
// 128 x 256 x 64 with three stages (128 x 256 x 32 where the arch's shared memory is ~100 KiB).
// fp32 FMA otherwise: 128 x 128 x 16, three stages, fewer where the arch's shared memory is
// smaller.
GemmTile default_gemm_tile(DType a, DType b, const std::string& arch, bool hopper_path);

KernelSpec gemm_spec(const GemmKind& kind, const GemmTile& tile);

// Dynamic shared memory of the kernel of `kind` on `tile` (its launches use exactly this).
unsigned gemm_smem(const GemmKind& kind, const GemmTile& tile);

// Grid from args.m and args.n; nothing is launched when either is zero. The kind is the kernel's
// (gemm_spec): a TMA tile's maps (the addend's too) are encoded from it and args here, tiles of
// few K slices are walked by persistent blocks, and a grid whose last wave would leave many
// blocks idle is split along K in `split` (templates/common/stream_k.cuh). A tile that takes the
// rows as N splits every tile into the same runs, in clusters of its row tiles (plan_rows_as_n).
void launch_gemm(const LoadedKernel& kernel, const kernels::GemmArgs& args, const GemmKind& kind,
                 const GemmTile& tile, const StreamKWorkspace& split, CUstream stream);

}  // namespace shardjit
