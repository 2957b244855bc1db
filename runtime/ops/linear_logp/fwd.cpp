#include "runtime/ops/linear_logp/fwd.hpp"

#include <algorithm>
#include <iterator>
#include <optional>

#include "linear_logp/fwd_layout.cuh"
#include "runtime/arch/arch.hpp"
#include "runtime/compile/template_registry.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/tensor_maps.hpp"
#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

std::optional<FwdTile> hopper_logit_tile(DType dtype, const std::string& arch, bool hopper_path, int stages) {
  if (!wgmma_applies(dtype, arch, hopper_path)) return std::nullopt;
  return FwdTile{128, 256, 64, stages, true};
}

std::vector<FwdTile> hopper_other_fwd_tiles(DType dtype, const std::string& arch, bool hopper_path) {
  if (!wgmma_applies(dtype, arch, hopper_path)) return {};
  std::vector<FwdTile> tiles = {FwdTile{128, 128, 64, 4, true}, FwdTile{128, 192, 64, 4, true}};
  for (const int bn : kFwdRowsAsNCols) {
    for (const int bm : kFwdRowsAsNRows) tiles.push_back(FwdTile{bm, bn, 64, fwd_rows_as_n_stages(bn), true, true});
  }
  return tiles;
}

FwdTile default_fwd_tile(DType dtype, const std::string& arch, bool hopper_path) {
  // 196,672 bytes: the TMA ring's four stages and their mbarriers, one slice of wgmma left in
  // flight (templates/linear_logp/fwd_hopper.cuh).
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
  // docs/perf-notes.md, "Portable forward": 128 x 256 halves the L2 traffic per flop
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

KernelSpec shape_free_logit_kernel_spec(const std::string& name, const LinearLogpConfig& c, const FwdTile& tile,
                                        std::vector<std::pair<std::string, ParamValue>> own) {
  std::vector<std::pair<std::string, ParamValue>> values = {
      {"T", TypeArg{dtype_name(c.dtype)}},
      {"BiasT", TypeArg{c.bias_dtype ? dtype_name(*c.bias_dtype) : "none"}},
      {"TargetT", TypeArg{dtype_name(c.target_dtype)}},
      {"BM", std::int64_t{tile.bm}},
      {"BN", std::int64_t{tile.bn}},
      {"BK", std::int64_t{tile.bk}},
      {"STAGES", std::int64_t{tile.stages}}};
  values.insert(values.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  return KernelSpec(name, values);
}

KernelSpec logit_kernel_spec(const std::string& name, const LinearLogpLayout& layout, const FwdTile& tile,
                             std::vector<std::pair<std::string, ParamValue>> own) {
  const LinearLogpConfig& c = layout.config;
  own.insert(own.end(), {{"H", c.hidden}, {"V_LOCAL", c.vocab_local}, {"V_VALID", layout.valid_local}});
  return shape_free_logit_kernel_spec(name, c, tile, std::move(own));
}

static_assert(kFwdRowsAsNKeepCols == kernels::kKeptColumnTileCols, "a keeping tile's maxima go by its columns");

bool fwd_tile_keeps(const FwdTile& tile, bool entropy) {
  return tile.rows_as_n && tile.bn == kFwdRowsAsNKeepCols && (!entropy || tile.bm <= kFwdKeepMostRowsWithEntropy);
}

std::vector<FwdTile> keeping_fwd_plan_tiles(std::span<const FwdTile> tiles, bool entropy) {
  std::vector<FwdTile> keeping;
  for (const FwdTile& t : tiles) {
    if (!t.rows_as_n || fwd_tile_keeps(t, entropy)) keeping.push_back(t);
  }
  return keeping;
}

KernelSpec linear_logp_fwd_spec(const LinearLogpLayout& layout, const FwdTile& tile, bool keeps) {
  const bool entropy = layout.config.want_entropy;
  if (keeps && !fwd_tile_keeps(tile, entropy)) {
    throw Error(ErrorCode::kInternal, "the forward keeps the backward's chunk in tiles of the rows as N of " +
                                          std::to_string(kFwdRowsAsNKeepCols) + " columns only, of at most " +
                                          std::to_string(kFwdKeepMostRowsWithEntropy) +
                                          " rows with entropy, not in " + std::to_string(tile.bm) + " x " +
                                          std::to_string(tile.bn) + " tiles" + (tile.rows_as_n ? " of the rows as N" : "") +
                                          (entropy ? " with entropy" : ""));
  }
  if (tile.rows_as_n) {
    return shape_free_logit_kernel_spec("linear_logp_fwd_rows_as_n", layout.config, tile,
                                        {{"ENTROPY", entropy}, {"KEEP", keeps}});
  }
  if (tile.wgmma) return shape_free_logit_kernel_spec("linear_logp_fwd_hopper", layout.config, tile, {{"ENTROPY", entropy}});
  return logit_kernel_spec("linear_logp_fwd", layout, tile, {{"ENTROPY", entropy}});
}

unsigned linear_logp_fwd_smem(DType dtype, const FwdTile& tile) {
  if (tile.rows_as_n) {
    return static_cast<unsigned>(kernels::linear_logp_fwd_rows_as_n_smem_bytes(static_cast<int>(dtype_size(dtype)),
                                                                             tile.bm, tile.bn, tile.bk, tile.stages));
  }
  return static_cast<unsigned>(kernels::linear_logp_fwd_smem_bytes(static_cast<int>(dtype_size(dtype)), tile.bm,
                                                                   tile.bn, tile.bk, tile.stages, tile.wgmma));
}

double fwd_plan_efficiency(const VocabSplit& plan, int sm_count) {
  const std::int64_t sms = std::max(1, sm_count);
  return static_cast<double>(plan.row_tiles) * plan.vocab_tiles /
         static_cast<double>(sms * std::max<std::int64_t>(1, fwd_plan_busiest_tiles(plan, sm_count)));
}

std::vector<int> vocab_split_candidates(std::int64_t row_tiles, std::int64_t vocab_tiles, int sm_count) {
  std::vector<int> candidates(kVocabSplitChoices.begin(), kVocabSplitChoices.end());
  const auto add = [&](std::int64_t splits) {
    if (splits >= 2 && splits <= vocab_tiles &&
        std::find(candidates.begin(), candidates.end(), splits) == candidates.end()) {
      candidates.insert(std::upper_bound(candidates.begin(), candidates.end(), splits), static_cast<int>(splits));
    }
  };
  const std::int64_t rows = std::max<std::int64_t>(1, row_tiles);
  add(sm_count / rows);                                // one wave of blocks
  if (rows * vocab_tiles <= sm_count) add(vocab_tiles);  // one wave of one-tile blocks
  return candidates;
}

namespace {

// `splits` splits of row_tiles x vocab_tiles tiles of `tile`, every unit whole, in groups of the
// row tiles a wave of `sms` blocks holds.
VocabSplit whole_unit_plan(const FwdTile& tile, std::int64_t row_tiles, std::int64_t vocab_tiles, int splits, int sms) {
  VocabSplit plan;
  plan.splits = splits;
  plan.group_rows = (sms + splits - 1) / splits;
  plan.row_tiles = static_cast<int>(row_tiles);
  plan.vocab_tiles = static_cast<int>(vocab_tiles);
  plan.whole_units = plan.units();
  plan.tile_cols = tile.bn;
  plan.tile_rows = tile.bm;
  plan.rows_as_n = tile.rows_as_n;
  return plan;
}

// The waves of a plan's blocks on sm_count multiprocessors: of whole units, then of pieces.
struct PlanWaves {
  std::int64_t whole;
  std::int64_t pieces;
};

PlanWaves plan_waves(const VocabSplit& plan, int sm_count) {
  const std::int64_t sms = std::max(1, sm_count);
  const std::int64_t piece_blocks = static_cast<std::int64_t>(plan.units() - plan.whole_units) * plan.unit_pieces;
  return {(plan.whole_units + sms - 1) / sms, (piece_blocks + sms - 1) / sms};
}

}  // namespace

VocabSplit choose_vocab_splits(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local,
                              const FwdTile& tile, const GpuShape& gpu, double tolerance, int max_splits,
                              bool cuts_last_waves) {
  const std::int64_t row_tiles = std::max<std::int64_t>(1, (n_rows + tile.bm - 1) / tile.bm);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(1, (valid_local + tile.bn - 1) / tile.bn);
  const int sms = std::max(1, gpu.sm_count);
  const auto usable = [&](int splits) { return splits <= vocab_tiles && splits <= max_splits; };
  const auto plan_for = [&](int splits) { return whole_unit_plan(tile, row_tiles, vocab_tiles, splits, sms); };
  // How well a count fills the waves as it will launch: over several waves the last two are cut
  // into pieces, which fill them whatever the count, so there the counts differ by their L2 reads.
  const auto efficiency_of = [&](int splits) {
    const VocabSplit plan = plan_for(splits);
    return fwd_plan_efficiency(cuts_last_waves ? cut_last_waves(plan, sms) : plan, sms);
  };
  // The blocks run in groups of group_rows row tiles: that many run at the same time.
  const auto x_fits_in_l2 = [&](int splits) {
    const std::int64_t active_row_tiles = std::min<std::int64_t>(row_tiles, plan_for(splits).group_rows);
    return active_row_tiles * tile.bm * row_bytes <= gpu.l2_bytes / kRunningXL2Share;
  };
  const std::vector<int> candidates = vocab_split_candidates(row_tiles, vocab_tiles, sms);
  std::vector<double> efficiencies;  // of the usable candidates, the first ones (ascending)
  for (int splits : candidates) {
    if (!usable(splits)) break;
    efficiencies.push_back(efficiency_of(splits));
  }
  const double best = efficiencies.empty() ? 0.0 : *std::max_element(efficiencies.begin(), efficiencies.end());
  // Each split costs partials traffic and a wider combine, so prefer few of them: the fewest
  // within the tolerance that either runs in one wave with kXSharingSplits splits or more a row
  // tile (every block starts at once and walks as many tiles, so the splits of a row tile read
  // its K slices together: 4097 rows ran 3-7 % faster on 4 splits than on 8 or 16 over several
  // waves, on an H100), or whose running X rows fit their share of the L2. Over several waves the
  // blocks fall out of step and stop sharing (16384 rows of H = 6144 or 8192 at 4 splits ran
  // 1.30-1.52 x cuBLAS on an H100, at 16 1.03 x), so where none of those qualifies, the fullest
  // count that fits (the fewest splits of equals): one split of 128 row tiles ran the forward
  // about twice as long. Where none fits at all, the fewest within the tolerance.
  std::optional<VocabSplit> within;
  std::optional<VocabSplit> fitting;
  double fitting_efficiency = -1.0;
  for (std::size_t i = 0; i < efficiencies.size(); ++i) {
    const int splits = candidates[i];
    const double efficiency = efficiencies[i];
    const bool fits = x_fits_in_l2(splits);
    const bool shares_x = splits >= kXSharingSplits && row_tiles * splits <= sms;
    if (efficiency >= best - tolerance) {
      if (fits || shares_x) return plan_for(splits);
      if (!within) within = plan_for(splits);
    }
    if (fits && efficiency > fitting_efficiency) {
      fitting = plan_for(splits);
      fitting_efficiency = efficiency;
    }
  }
  if (fitting) return *fitting;
  return within.value_or(plan_for(1));
}

VocabSplit fixed_vocab_splits(std::int64_t n_rows, std::int64_t valid_local, const FwdTile& tile, const GpuShape& gpu,
                              int splits) {
  const std::int64_t row_tiles = std::max<std::int64_t>(1, (n_rows + tile.bm - 1) / tile.bm);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(1, (valid_local + tile.bn - 1) / tile.bn);
  const int sms = std::max(1, gpu.sm_count);
  const auto count = static_cast<int>(
      std::clamp<std::int64_t>(splits, 1, std::min<std::int64_t>(vocab_tiles, kMaxCombineSources)));
  return whole_unit_plan(tile, row_tiles, vocab_tiles, count, sms);
}

std::int64_t fwd_plan_busiest_tiles(const VocabSplit& plan, int sm_count) {
  const PlanWaves waves = plan_waves(plan, sm_count);
  return waves.whole * plan.split_tiles() +
         waves.pieces * kernels::fwd_piece_tiles(plan.split_tiles(), plan.unit_pieces);
}

std::int64_t fwd_plan_busiest_blocks(const VocabSplit& plan, int sm_count) {
  const PlanWaves waves = plan_waves(plan, sm_count);
  return waves.whole + waves.pieces;
}

double fwd_tile_cost(int tile_rows, int tile_cols, bool rows_as_n, std::int64_t k_slices) {
  if (rows_as_n) {
    if (std::ranges::find(kFwdRowsAsNCols, tile_cols) != std::end(kFwdRowsAsNCols) &&
        std::ranges::find(kFwdRowsAsNRows, tile_rows) != std::end(kFwdRowsAsNRows)) {
      const double rows = static_cast<double>(tile_rows) / kRowsAsNFittedRows;
      const double fold = tile_cols == 256 ? kRowsAsNWideFold : 1.0;
      return kRowsAsNTileCost * rows_as_n_slice_work(tile_rows, tile_cols) /
                 rows_as_n_slice_work(kRowsAsNFittedRows, 128) +
             rows * fold * kRowsAsNSliceCost / static_cast<double>(std::max<std::int64_t>(1, k_slices));
    }
    throw Error(ErrorCode::kInternal, "fwd_tile_cost: no cost for a tile of the rows as N of " +
                                          std::to_string(tile_rows) + " x " + std::to_string(tile_cols) +
                                          "; expected BM x 128 or BM x 256, BM one of " + fwd_rows_as_n_rows_text());
  }
  switch (tile_cols) {
    case 128: return 0.64;
    case 192: return 0.79;
    case 256: return 1.0;
    default:
      throw Error(ErrorCode::kInternal, "fwd_tile_cost: no cost for a forward tile of " + std::to_string(tile_cols) +
                                            " columns; expected 128, 192 or 256");
  }
}

double fwd_plan_time(const VocabSplit& plan, int sm_count, std::int64_t k_slices) {
  const double tiles = fwd_tile_cost(plan.tile_rows, plan.tile_cols, plan.rows_as_n, k_slices) *
                       static_cast<double>(fwd_plan_busiest_tiles(plan, sm_count));
  if (!plan.rows_as_n) return tiles;
  const double block_end = kRowsAsNBlockEnd * plan.tile_rows / kRowsAsNFittedRows;
  return tiles + block_end * static_cast<double>(fwd_plan_busiest_blocks(plan, sm_count));
}

bool other_tile_pays(const VocabSplit& wide, const VocabSplit& other, bool narrowest, int sm_count,
                     std::int64_t k_slices) {
  if (wide.row_tiles == 1) return narrowest && !other.rows_as_n;
  if (other.rows_as_n && fwd_plan_busiest_tiles(other, sm_count) < kRowsAsNFittedBusiestTiles) return false;
  return fwd_plan_time(other, sm_count, k_slices) <= (1.0 - kOtherTileGain) * fwd_plan_time(wide, sm_count, k_slices);
}

VocabSplit choose_fwd_plan(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local, const FwdTile& tile,
                           std::span<const FwdTile> others, const GpuShape& gpu, std::int64_t first_col) {
  const VocabSplit wide = cut_last_waves(choose_vocab_splits(n_rows, row_bytes, valid_local, tile, gpu), gpu.sm_count);
  // Other tiles are weighed only against a wide plan of one wave (other_tile_pays): on the calls of
  // several waves their plans are not worked out at all.
  if (wide.units() > std::max(1, gpu.sm_count)) return wide;
  const std::int64_t k_slices = fwd_k_slices(row_bytes);
  // At one row tile the narrowest tile of the rows as M runs (other_tile_pays).
  int narrowest = tile.bn;
  for (const FwdTile& other : others) {
    if (!other.rows_as_n) narrowest = std::min(narrowest, other.bn);
  }
  std::optional<VocabSplit> best;
  for (const FwdTile& other : others) {
    if (first_col % other.bn != 0) continue;
    const VocabSplit plan =
        cut_last_waves(choose_vocab_splits(n_rows, row_bytes, valid_local, other, gpu), gpu.sm_count);
    if (!other_tile_pays(wide, plan, other.bn == narrowest, gpu.sm_count, k_slices)) continue;
    if (!best || fwd_plan_time(plan, gpu.sm_count, k_slices) < fwd_plan_time(*best, gpu.sm_count, k_slices)) {
      best = plan;
    }
  }
  return best.value_or(wide);
}

VocabSplit cut_last_waves(VocabSplit plan, int sm_count) {
  const int sms = std::max(1, sm_count);
  // A split's pieces are its partial sources, and one combine merges at most kMaxCombineSources
  // a row: a very long shard gets fewer, longer pieces.
  const int pieces = std::min((plan.split_tiles() + kFwdPieceTiles - 1) / kFwdPieceTiles,
                              kMaxCombineSources / std::max(1, plan.splits));
  if (plan.units() <= sms || pieces < 2) return plan;
  plan.whole_units = (plan.units() / sms - 1) * sms;
  plan.unit_pieces = pieces;
  return plan;
}

std::int64_t max_partial_rows(std::int64_t n_rows, int bm, const std::function<int(std::int64_t)>& sources_for) {
  std::int64_t most = 0;
  for (std::int64_t rows = bm; rows < n_rows + bm; rows += bm) {
    const std::int64_t r = std::min(rows, n_rows);
    const std::int64_t first = rows - bm + 1;  // the tile's fewest rows: the widest kept chunks
    most = std::max(most, r * std::max(sources_for(first), sources_for(r)));
  }
  return most;
}

kernels::LinearLogpFwdArgs linear_logp_fwd_args(const LinearLogpLayout& layout, const LinearLogpInputs& in,
                                                std::int64_t n, std::int64_t hidden_stride, std::int64_t weight_stride,
                                                kernels::RowPartial* partials, const VocabSplit& plan) {
  kernels::LinearLogpFwdArgs args{};
  set_logit_inputs(args, layout, in, n, hidden_stride, weight_stride);
  args.partials = partials;
  args.row_tiles = plan.row_tiles;
  args.splits = plan.splits;
  args.group_rows = plan.group_rows;
  args.whole_units = plan.whole_units;
  args.unit_pieces = plan.unit_pieces;
  args.hidden_size = static_cast<int>(layout.config.hidden);
  return args;
}

bool fwd_merges_in_kernel(std::int64_t n_rows, int bm, int sources) {
  const std::int64_t rows = std::min<std::int64_t>(n_rows, bm);
  return rows * kernels::combine_lanes_per_row(sources) <= kernels::linear_logp_fwd_threads;
}

void launch_linear_logp_fwd(const LoadedKernel& kernel, const kernels::LinearLogpFwdArgs& args,
                            const VocabSplit& plan, const LinearLogpLayout& layout, const FwdTile& tile,
                            CUstream stream) {
  LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(plan.blocks());
  shape.block_x = static_cast<unsigned>(kernels::linear_logp_fwd_block_threads(tile.wgmma));
  shape.smem_bytes = linear_logp_fwd_smem(layout.config.dtype, tile);
  kernels::LinearLogpFwdParams params{};
  params.args = args;
  if (tile.wgmma) {
    encode_fwd_tensor_maps(params, layout.config.dtype, layout.config.hidden, layout.valid_local, args.n_rows,
                           tile.bm, tile.bn);
  }
  launch(kernel, shape, params, stream);
}

}  // namespace shardjit
