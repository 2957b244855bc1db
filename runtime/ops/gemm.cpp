#include "runtime/ops/gemm.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "gemm/gemm_layout.cuh"
#include "runtime/arch/arch.hpp"
#include "runtime/ops/tensor_maps.hpp"
#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

namespace {

// Tensor cores: 64 x 64 warp blocks in 128 x 256 tiles, as the forward's main loop (0.25
// ldmatrix per mma instead of 0.375, a quarter less L2 traffic per flop than 128 x 128; see
// docs/perf-notes.md, "Portable forward"). No epilogue tile, so BK = 64 and three stages fit A100's
// shared memory too.
constexpr GemmTile kGemmTilesWide[] = {
    {128, 256, 64, 3},  // 147,456 B: H100, H200, B200, A100
    {128, 256, 32, 3},  //  73,728 B: the 101,376-byte parts
    {128, 128, 32, 4},  //  65,536 B
};

// The TMA loop's tiles of at most this many K slices are walked by persistent blocks: a block's
// start (its barriers, its tensor maps, its first loads from HBM) weighs on a short tile, such as
// grad_weight's 4 slices at llama3-8b-decode (the op 6-8 % faster persistent, H200). Longer tiles
// go one a block, which lets the hardware hand each to whichever multiprocessor frees up first:
// persistent blocks on grad_hidden's 128-slice tiles at llama3-8b-16k took ~1 % longer.
constexpr int kGemmPersistentMaxSlices = 32;

// The former default (64 x 32 warp blocks, two blocks a multiprocessor), still a valid spec.
[[maybe_unused]] constexpr GemmTile kGemmTilesNarrow[] = {
    {128, 128, 32, 4},  // 65,536 B
};

// The table default_gemm_tile picks from (kGemmTilesNarrow to go back to the former tile).
constexpr std::span<const GemmTile> kGemmMmaTiles = kGemmTilesWide;

}  // namespace

GemmTile default_gemm_tile(DType a, DType b, const std::string& arch, bool hopper_path) {
  const unsigned limit = smem_limit_for_arch(arch);
  const bool tensor_cores = a == b && a != DType::kFP32;
  // The Hopper loop where it applies: four stages fed by TMA, one slice of wgmma left in flight;
  // 196,672 bytes, and 231,488 with a 16-bit output's staging area.
  if (tensor_cores && wgmma_applies(a, arch, hopper_path)) return GemmTile{128, 256, 64, 4, true, true};
  // Without TMA a kernel's shared memory does not depend on its output's type.
  const GemmKind kind{a, b};
  if (!tensor_cores) {
    GemmTile tile{128, 128, 16, 3};
    while (tile.stages > 2 && gemm_smem(kind, tile) > limit) --tile.stages;
    return tile;
  }
  for (const GemmTile& tile : kGemmMmaTiles) {
    if (gemm_smem(kind, tile) <= limit) return tile;
  }
  return kGemmMmaTiles.back();
}

GemmTile gemm_rows_as_n_tile(int bm) { return GemmTile{bm, 128, 64, 4, true, true, true}; }

double rows_as_n_slice_work(int bm, int cols) {
  return bm * cols / 32768.0 * std::max(1.0, (8192.0 / bm + 64.0 + 4096.0 / cols) / 128.0);
}

double gemm_busy_blocks(const kernels::StreamKPlan& plan, int resident) {
  if (plan.workers > 0 && plan.whole_tiles == 0) return plan.workers;
  if (plan.workers > 0) {
    // Full waves of whole tiles, then the last wave's runs of (split tiles / workers) tiles each.
    const double waves = static_cast<double>(plan.whole_tiles) / resident +
                         static_cast<double>(plan.tiles - plan.whole_tiles) / plan.workers;
    return plan.tiles / waves;
  }
  if (plan.tiles <= 0 || resident <= 0) return 1.0;
  const int waves = (plan.tiles + resident - 1) / resident;
  return static_cast<double>(plan.tiles) / waves;
}

kernels::StreamKPlan gemm_rows_as_n_plan(std::int64_t m, std::int64_t n, std::int64_t k, int bm, int resident,
                                         bool partial_waves, const kernels::StreamKClusters& clusters) {
  const std::int64_t row_tiles = (m + bm - 1) / bm;
  const std::int64_t tiles = row_tiles * ((n + 127) / 128);
  const std::int64_t slices = std::min<std::int64_t>((k + 63) / 64, std::int64_t{1} << 30);
  return kernels::plan_rows_as_n(static_cast<int>(tiles), static_cast<int>(slices), resident,
                                 static_cast<int>(row_tiles), partial_waves, clusters);
}

int gemm_rows_as_n_rows(std::int64_t m, std::int64_t n, std::int64_t k, int resident, bool partial_waves,
                        const kernels::StreamKClusters& clusters, std::int64_t l2_bytes) {
  if (m <= 128 || m > kGemmRowsAsNMaxRows || n <= 0 || k <= 0 || resident <= 0) return 0;
  const std::int64_t slices = (k + 63) / 64;
  const std::int64_t row_tiles = (m + 255) / 256;
  const std::int64_t tiles = row_tiles * ((n + 127) / 128);
  const std::int64_t usual_row_tiles = (m + 127) / 128;
  const std::int64_t usual_tiles = usual_row_tiles * ((n + 255) / 256);
  if (tiles > std::numeric_limits<int>::max() || usual_tiles > std::numeric_limits<int>::max() ||
      slices > std::numeric_limits<int>::max()) {
    return 0;
  }
  const int bm = static_cast<int>(std::max<std::int64_t>(((m + row_tiles - 1) / row_tiles + 31) / 32 * 32, 160));
  const double work = rows_as_n_slice_work(bm);
  const kernels::StreamKPlan usual =
      kernels::cluster_stream_k(kernels::plan_launch_stream_k(static_cast<int>(usual_tiles), static_cast<int>(slices),
                                                              resident, static_cast<int>(usual_row_tiles), true,
                                                              partial_waves),
                                static_cast<int>(usual_row_tiles), resident, clusters);
  const kernels::StreamKPlan rows_as_n = gemm_rows_as_n_plan(m, n, k, bm, resident, partial_waves, clusters);
  const double usual_time = static_cast<double>(usual_tiles * slices) / gemm_busy_blocks(usual, resident);
  const double time = static_cast<double>(tiles * slices) * work / gemm_busy_blocks(rows_as_n, resident);
  const bool rereads_a = kernels::stream_k_split_whole(usual) && 2 * (2 * m * k) > l2_bytes;
  const double margin = rereads_a ? 1.05 : 0.95;
  return time <= margin * usual_time ? bm : 0;
}

KernelSpec gemm_spec(const GemmKind& kind, const GemmTile& tile) {
  return KernelSpec("gemm", {{"TA", TypeArg{dtype_name(kind.a)}},
                             {"TB", TypeArg{dtype_name(kind.b)}},
                             {"OutT", TypeArg{dtype_name(kind.out)}},
                             {"AddT", TypeArg{dtype_name(kind.addend)}},
                             {"A_TRANS", kind.a_trans},
                             {"BM", std::int64_t{tile.bm}},
                             {"BN", std::int64_t{tile.bn}},
                             {"BK", std::int64_t{tile.bk}},
                             {"STAGES", std::int64_t{tile.stages}},
                             {"WGMMA", tile.wgmma},
                             {"TMA", tile.tma},
                             {"FILTER", kind.filter},
                             {"ROWS_AS_N", tile.rows_as_n}});
}

unsigned gemm_smem(const GemmKind& kind, const GemmTile& tile) {
  return static_cast<unsigned>(kernels::gemm_smem_bytes(
      static_cast<int>(dtype_size(kind.a)), static_cast<int>(dtype_size(kind.b)), static_cast<int>(dtype_size(kind.out)),
      tile.bm, tile.bn, tile.bk, tile.stages, tile.tma, tile.rows_as_n));
}

void launch_gemm(const LoadedKernel& kernel, const kernels::GemmArgs& args, const GemmKind& kind,
                 const GemmTile& tile, const StreamKWorkspace& split, CUstream stream) {
  if (args.m == 0 || args.n == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((args.m + tile.bm - 1) / tile.bm);
  shape.grid_y = static_cast<unsigned>((args.n + tile.bn - 1) / tile.bn);
  shape.block_x = static_cast<unsigned>(kernels::gemm_block_threads(tile.tma));
  shape.smem_bytes = gemm_smem(kind, tile);
  kernels::GemmParams params{};
  params.args = args;
  if (tile.tma) {
    // B without rows of data reads as zeros: the product is zero (out = addend, or zeros), and
    // with k = 0 no map is read, so none is encoded: the views of an empty call may hold
    // anything the driver would refuse (a null base, a stride that is not a multiple of 16).
    if (params.args.b_rows == 0) params.args.k = 0;
    // Its 16-bit tiles go out by TMA stores through a map of the output, its fp32 tiles by 16-byte
    // stores (GemmEpilogue::write_tile); the ops' views are checked for both (view_checks.hpp),
    // and their own buffers are allocated so.
    const auto out_base = reinterpret_cast<std::uintptr_t>(args.out);
    const auto out_elem = static_cast<std::int64_t>(dtype_size(kind.out));
    if (out_base % 16 != 0 || (args.out_stride * out_elem) % 16 != 0 || args.n % 8 != 0) {
      throw Error(ErrorCode::kInternal, "the TMA GEMM's output must be 16-byte aligned, with rows a multiple of 16 "
                                        "bytes apart and long (row stride " + std::to_string(args.out_stride) +
                                        ", n " + std::to_string(args.n) + ")");
    }
    // A [m][k]'s last row tile, where shorter (grad_hidden: dZ's rows), in a box of its rows.
    if (params.args.k > 0) encode_gemm_tensor_maps(params, kind.a, kind.a_trans, tile.bm);
    // The tiles of the rows as N read their addend from global memory and store from the registers.
    params.stage_addend = !tile.rows_as_n && encode_gemm_addend_map(params, kind.addend, tile.bm) ? 1 : 0;
    if (kernels::gemm_tma_stages_output(static_cast<int>(out_elem), tile.rows_as_n)) {
      encode_gemm_output_map(params, kind.out);
    }
    const int slices = static_cast<int>((params.args.k + tile.bk - 1) / tile.bk);
    const int row_tiles = static_cast<int>(shape.grid_x);
    const int tiles = static_cast<int>(shape.grid_x * shape.grid_y);
    if (tile.rows_as_n) {
      // Every tile cut at the same K slices, its row tiles in clusters where they fit (a filter's
      // row tiles skip different slices, so its blocks could not keep in step).
      params.split = split.rows_as_n(tiles, slices, kind.filter ? 1 : row_tiles);
    } else {
      params.split = split.plan(tiles, slices, row_tiles, true);
      // Split whole over a few row tiles, in clusters that share B's slices (gemm/gemm_tma.cuh); a
      // filter skips different slices in each row tile, so its blocks could not keep in step.
      if (!kind.filter) params.split = split.clustered(params.split, row_tiles);
    }
    const bool persistent = slices <= kGemmPersistentMaxSlices;
    shape.grid_x = static_cast<unsigned>(split.grid(params.split, persistent));
    shape.grid_y = 1;
    shape.cluster_x = static_cast<unsigned>(params.split.cluster);
  }
  launch(kernel, shape, params, stream);
}

}  // namespace shardjit
