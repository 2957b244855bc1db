#include "runtime/ops/linear_logp_fwd.hpp"

#include <algorithm>
#include <array>
#include <iterator>
#include <optional>

#include "linear_logp/fwd_layout.cuh"
#include "runtime/sched/launch.hpp"

namespace shardjit {

unsigned smem_limit_for_arch(const std::string& arch) {
  // Opt-in shared memory per block (CUDA programming guide, compute capability tables).
  if (arch.rfind("sm_90", 0) == 0 || arch.rfind("sm_100", 0) == 0) return 232448;
  if (arch == "sm_80" || arch == "sm_87") return 166912;
  return 101376;  // sm_86, sm_89, sm_120 and unknown: the smallest of the data-center tiers
}

std::optional<FwdTile> hopper_logit_tile(DType dtype, const std::string& arch, bool hopper_path, int stages) {
  // wgmma exists on sm_90a alone (not on sm_90, nor on later parts' arch-specific targets).
  if (!hopper_path || arch != "sm_90a" || dtype == DType::kFP32) return std::nullopt;
  return FwdTile{128, 256, 64, stages, true};
}

FwdTile default_fwd_tile(DType dtype, const std::string& arch, bool hopper_path) {
  // 196,608 bytes: four stages, and one slice of wgmma left in flight across each slice barrier
  // (templates/linear_logp/logit_mainloop.cuh).
  if (auto hopper = hopper_logit_tile(dtype, arch, hopper_path, 4)) return *hopper;
  const unsigned limit = smem_limit_for_arch(arch);
  if (dtype == DType::kFP32) {
    FwdTile tile;
    tile.bk = 32;  // 128-byte rows of fp32, as bf16's 64 elements are
    while (tile.stages > 2 && linear_logp_fwd_smem(dtype, tile) > limit) --tile.stages;
    if (linear_logp_fwd_smem(dtype, tile) > limit) tile = FwdTile{64, 128, 32, 2};  // 85,248 B
    return tile;
  }
  // 16-bit inputs: the first portable tile that fits.
  for (const FwdTile& tile : portable_fwd_tiles()) {
    if (linear_logp_fwd_smem(dtype, tile) <= limit) return tile;
  }
  return portable_fwd_tiles().back();
}

std::span<const FwdTile> portable_fwd_tiles() {
  // docs/perf-notes.md, "Portable forward main loop": 128 x 256 halves the L2 traffic per flop
  // of 128 x 128 and runs 17 % faster on H200; BK = 64 beats BK = 32 by 9 % there (half the
  // barriers), so A100-class parts fall back to BK = 32 only because three 48 KiB stages do not
  // fit in their 166,912 bytes.
  static constexpr FwdTile kTiles[] = {
      {128, 256, 64, 3},  // 219,648 B: H100, H200, B200 (232,448)
      {128, 256, 32, 3},  // 145,920 B: A100 (166,912)
      {64, 256, 32, 3},   //  97,536 B: the 101,376-byte parts
      {64, 128, 32, 2},   //  60,672 B
  };
  return kTiles;
}

KernelSpec logit_kernel_spec(const std::string& name, const LinearLogpLayout& layout, const FwdTile& tile,
                             std::vector<std::pair<std::string, ParamValue>> own) {
  const LinearLogpConfig& c = layout.config;
  std::vector<std::pair<std::string, ParamValue>> values = {
      {"T", TypeArg{dtype_name(c.dtype)}},
      {"BiasT", TypeArg{c.bias_dtype ? dtype_name(*c.bias_dtype) : "none"}},
      {"TargetT", TypeArg{dtype_name(c.target_dtype)}},
      {"H", c.hidden},
      {"V_LOCAL", c.vocab_local},
      {"V_VALID", layout.valid_local},
      {"BM", std::int64_t{tile.bm}},
      {"BN", std::int64_t{tile.bn}},
      {"BK", std::int64_t{tile.bk}},
      {"STAGES", std::int64_t{tile.stages}},
      {"WGMMA", tile.wgmma}};
  values.insert(values.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  return KernelSpec(name, values);
}

KernelSpec linear_logp_fwd_spec(const LinearLogpLayout& layout, const FwdTile& tile) {
  return logit_kernel_spec("linear_logp_fwd", layout, tile, {{"ENTROPY", layout.config.want_entropy}});
}

unsigned linear_logp_fwd_smem(DType dtype, const FwdTile& tile) {
  return static_cast<unsigned>(kernels::linear_logp_fwd_smem_bytes(static_cast<int>(dtype_size(dtype)), tile.bm,
                                                                   tile.bn, tile.bk, tile.stages, tile.wgmma));
}

namespace {

// A block's fixed cost beside its tiles, in tiles: filling the ring before the first product,
// merging and storing the partials after the last (~3 us against ~56 us for a 128 x 256 tile
// of K = 4096 on an H200). It keeps the choice from cutting the vocabulary into slivers.
constexpr double kBlockCostTiles = 0.05;

}  // namespace

double fwd_split_fill(std::int64_t row_tiles, std::int64_t vocab_tiles, int splits, int sm_count) {
  const std::int64_t sms = std::max(1, sm_count);
  const std::int64_t blocks = row_tiles * splits;
  const double mean = static_cast<double>(vocab_tiles) / splits;
  const double longest = static_cast<double>((vocab_tiles + splits - 1) / splits);
  const std::int64_t full_waves = blocks / sms;
  // After whole waves only, the last one still waits for its longest block.
  const double tail = blocks % sms > 0 ? longest + kBlockCostTiles : longest - mean;
  const double makespan = static_cast<double>(full_waves) * (mean + kBlockCostTiles) + tail;
  return static_cast<double>(row_tiles * vocab_tiles) / (static_cast<double>(sms) * makespan);
}

SplitPlan choose_vocab_splits(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local,
                              const FwdTile& tile, const GpuShape& gpu, double tolerance, int max_splits) {
  const std::int64_t row_tiles = std::max<std::int64_t>(1, (n_rows + tile.bm - 1) / tile.bm);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(1, (valid_local + tile.bn - 1) / tile.bn);
  const int sms = std::max(1, gpu.sm_count);
  const std::int64_t row_tile_bytes = std::max<std::int64_t>(1, tile.bm * row_bytes);
  const int most = static_cast<int>(std::clamp<std::int64_t>(std::min(max_splits, kMaxVocabSplits), 1, vocab_tiles));
  // One wave holds ceil(SMs / splits) row tiles' blocks.
  const auto wave_rows = [&](int splits) { return std::min<std::int64_t>(row_tiles, (sms + splits - 1) / splits); };
  const auto x_fits_in_l2 = [&](int splits) { return wave_rows(splits) * row_tile_bytes <= gpu.l2_bytes / 2; };
  // fill[s - 1]: the estimated fill of s splits, 0 where X would not fit (unless nothing fits).
  std::array<double, kMaxVocabSplits> fill{};
  bool any_fits = false;
  for (int splits = 1; splits <= most; ++splits) any_fits = any_fits || x_fits_in_l2(splits);
  double best = 0.0;
  for (int splits = 1; splits <= most; ++splits) {
    if (!x_fits_in_l2(splits) && any_fits) continue;
    fill[splits - 1] = fwd_split_fill(row_tiles, vocab_tiles, splits, sms);
    best = std::max(best, fill[splits - 1]);
  }
  int chosen = most;
  for (int splits = 1; splits <= most; ++splits) {
    if (fill[splits - 1] > 0.0 && fill[splits - 1] >= best - tolerance) {
      chosen = splits;
      break;
    }
  }
  // The block order's groups: at least the row tiles of one wave, and as many more as keep their
  // X in a third of the L2 (the rest holds the W tiles the group streams), so that each W tile
  // is read by that many blocks at about the same time.
  const std::int64_t fit_rows = gpu.l2_bytes / 3 / row_tile_bytes;
  const std::int64_t group = std::min(row_tiles, std::max<std::int64_t>(wave_rows(chosen), fit_rows));
  return SplitPlan{chosen, static_cast<int>(std::max<std::int64_t>(1, group))};
}

std::int64_t max_partial_rows(std::int64_t n_rows, int bm, const std::function<int(std::int64_t)>& splits_for) {
  std::int64_t most = 0;
  for (std::int64_t rows = bm; rows < n_rows + bm; rows += bm) {
    const std::int64_t r = std::min(rows, n_rows);
    most = std::max(most, r * splits_for(r));
  }
  return most;
}

void launch_linear_logp_fwd(const LoadedKernel& kernel, const kernels::LinearLogpFwdArgs& args,
                            const FwdTile& tile, int splits, unsigned smem_bytes, CUstream stream) {
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(splits);
  shape.grid_y = static_cast<unsigned>((args.n_rows + tile.bm - 1) / tile.bm);
  shape.block_x = static_cast<unsigned>(kernels::linear_logp_fwd_threads);
  shape.smem_bytes = smem_bytes;
  launch(kernel, shape, args, stream);
}

}  // namespace shardjit
