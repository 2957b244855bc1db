#include "runtime/ops/linear_logp/bwd/dz.hpp"

#include <span>

#include "linear_logp/bwd_dz_layout.cuh"
#include "runtime/ops/tensor_maps.hpp"
#include "runtime/sched/launch.hpp"

namespace shardjit {

namespace {

// 16-bit inputs: the forward's tiles (docs/perf-notes.md, "Portable forward" and
// "Backward design"). The dZ kernel runs the forward's main loop and takes its tile in the same
// 128-column chunks, so the logit tile of a 128 x 256 tile is 68 KiB and three 48 KiB stages fit.
constexpr FwdTile kDzTilesWide[] = {
    {128, 256, 64, 3},  // 219,664 B: H100, H200, B200 (232,448)
    {128, 256, 32, 3},  // 145,936 B: A100 (166,912)
    {64, 256, 32, 3},   //  97,552 B: the 101,376-byte parts
    {64, 128, 32, 2},   //  60,688 B
};

// The former default (128-column tiles, 64 x 32 warp blocks), still valid specs: what its search
// (128 x 128 x 64 x 3, then two stages, then BK = 32, then BM = 64 until one fits) picked.
[[maybe_unused]] constexpr FwdTile kDzTilesNarrow[] = {
    {128, 128, 64, 3},  // 170,512 B
    {128, 128, 64, 2},  // 137,744 B
    {128, 128, 32, 2},  // 104,976 B
    {64, 128, 32, 2},   //  60,688 B
};

// The table default_bwd_dz_tile picks from (kDzTilesNarrow to go back to the former tiles).
constexpr std::span<const FwdTile> kDzTiles = kDzTilesWide;

}  // namespace

FwdTile default_bwd_dz_tile(DType dtype, const std::string& arch, bool hopper_path) {
  // 232,448 bytes, the opt-in limit: the Hopper epilogue works in registers, so the TMA ring
  // takes four stages and leaves one slice of wgmma in flight, as the forward's, beside the
  // epilogue's 34 KiB staging area on its 1024-byte boundary.
  if (auto hopper = hopper_logit_tile(dtype, arch, hopper_path, 4)) return *hopper;
  const unsigned limit = smem_limit_for_arch(arch);
  if (dtype == DType::kFP32) {
    // 128-byte K rows, three stages, the pipeline shortened and then the rows halved where the
    // arch's shared memory cannot hold them next to the epilogue's logit tile.
    FwdTile tile{128, 128, 32, 3};
    while (tile.stages > 2 && linear_logp_bwd_dz_smem(dtype, tile) > limit) --tile.stages;
    if (linear_logp_bwd_dz_smem(dtype, tile) > limit) tile.bm = 64;
    return tile;
  }
  for (const FwdTile& tile : kDzTiles) {
    if (linear_logp_bwd_dz_smem(dtype, tile) <= limit) return tile;
  }
  return kDzTiles.back();
}

unsigned linear_logp_bwd_dz_smem(DType dtype, const FwdTile& tile) {
  return static_cast<unsigned>(kernels::linear_logp_bwd_dz_smem_bytes(static_cast<int>(dtype_size(dtype)), tile.bm,
                                                                      tile.bn, tile.bk, tile.stages, tile.wgmma));
}

KernelSpec linear_logp_bwd_dz_spec(const LinearLogpLayout& layout, DType dz, const FwdTile& tile, bool filter) {
  if (tile.wgmma) {
    return shape_free_logit_kernel_spec("linear_logp_bwd_dz_hopper", layout.config, tile,
                                        {{"DZ", TypeArg{dtype_name(dz)}}, {"FILTER", filter}});
  }
  return logit_kernel_spec("linear_logp_bwd_dz", layout, tile, {{"DZ", TypeArg{dtype_name(dz)}}, {"FILTER", filter}});
}

KernelSpec linear_logp_fwd_keep_spec(const LinearLogpLayout& layout, const FwdTile& tile) {
  return shape_free_logit_kernel_spec("linear_logp_fwd_keep", layout.config, tile, {});
}

KernelSpec linear_logp_bwd_kept_dz_spec(const LinearLogpLayout& layout, DType dz, int tile_cols) {
  return KernelSpec("linear_logp_bwd_kept_dz", {{"TargetT", TypeArg{dtype_name(layout.config.target_dtype)}},
                                                 {"DZ", TypeArg{dtype_name(dz)}},
                                                 {"BN", std::int64_t{tile_cols}}});
}

kernels::LinearLogpBwdDzArgs chunk_logit_args(const LinearLogpLayout& layout, const LinearLogpInputs& in,
                                              std::int64_t n, std::int64_t hidden_stride, std::int64_t weight_stride,
                                              void* dz, std::int64_t dz_stride, std::int64_t chunk_begin,
                                              std::int64_t chunk_cols) {
  const LinearLogpConfig& c = layout.config;
  kernels::LinearLogpBwdDzArgs args{};
  set_logit_inputs(args, layout, in, n, hidden_stride, weight_stride);
  args.dz = dz;
  args.dz_stride = dz_stride;
  args.valid_vocab = c.valid_vocab;
  args.ignore_index = c.ignore_index;
  args.chunk_begin = static_cast<int>(chunk_begin);
  args.chunk_cols = static_cast<int>(chunk_cols);
  return args;
}

void launch_linear_logp_bwd_kept_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                                    int multiprocessors, CUstream stream) {
  if (args.n_rows == 0) return;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(args.n_rows);
  shape.grid_y = static_cast<unsigned>(kernels::linear_logp_bwd_kept_dz_row_blocks(args.n_rows, args.chunk_cols, multiprocessors));
  shape.block_x = static_cast<unsigned>(kernels::linear_logp_bwd_kept_dz_threads);
  launch(kernel, shape, args, stream);
}

void launch_linear_logp_bwd_dz(const LoadedKernel& kernel, const kernels::LinearLogpBwdDzArgs& args,
                               const LinearLogpLayout& layout, const FwdTile& tile, DType dz,
                               const StreamKWorkspace& split, CUstream stream) {
  if (args.n_rows == 0 || args.chunk_cols == 0) return;
  const std::int64_t row_tiles = (args.n_rows + tile.bm - 1) / tile.bm;
  const std::int64_t col_tiles = (args.chunk_cols + tile.bn - 1) / tile.bn;
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(row_tiles);
  shape.grid_y = static_cast<unsigned>(col_tiles);
  shape.block_x = static_cast<unsigned>(kernels::linear_logp_bwd_dz_block_threads(tile.wgmma));
  shape.smem_bytes = linear_logp_bwd_dz_smem(layout.config.dtype, tile);
  kernels::LinearLogpBwdDzParams params{};
  params.args = args;
  if (tile.wgmma) {
    const int slices = static_cast<int>((layout.config.hidden + tile.bk - 1) / tile.bk);
    params.split = split.plan(static_cast<int>(row_tiles * col_tiles), slices, static_cast<int>(row_tiles), false);
    shape.grid_x = static_cast<unsigned>(split.grid(params.split, true));
    shape.grid_y = 1;
    encode_dz_tensor_maps(params, layout.config.dtype, layout.config.hidden, layout.valid_local, args.n_rows,
                          tile.bm, tile.bn);
    if (dtype_size(dz) == 2) encode_dz_output_map(params, dz);
  }
  launch(kernel, shape, params, stream);
}

}  // namespace shardjit
