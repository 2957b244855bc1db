#include "runtime/ops/linear_logp/bwd/chunks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/stream_k.cuh"
#include "runtime/ops/gemm.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The dZ kernel's grid has the chunk's column tiles in y, which holds at most 65535.
constexpr std::int64_t kMaxTilesPerChunk = 65535;

// What a tile of each backward kernel takes beyond its product, as K of that product: the time of
// its epilogue (dZ's exp and stores, grad_weight's 16-bit store, grad_hidden's fp32 accumulator
// read and written). The kernels' time over their whole waves' K, per kernel at H 2304 and 4096,
// N 16384 (one H100, perf-notes "Chunk width"): 380-420, 490-590 and 1000-1150.
struct EpilogueK {
  double dz = 400;
  double grad_weight = 500;
  double grad_hidden = 1000;
};
constexpr EpilogueK kBwdEpilogueK{};

// The widest width searched below is this fraction's inverse times the narrowest.
constexpr std::int64_t kNarrowestNum = 3;
constexpr std::int64_t kNarrowestDen = 4;
// A narrower width is taken only where the estimate gains more than this share: estimated gains
// of 1.1 % (gpt-oss-20b and qwen3-1.7b at 4097 rows) measured -0.7 to +0.4 %, within the noise
// (one H100, perf-notes "Chunk width").
constexpr double kWaveGain = 0.015;

}  // namespace

void check_backward_config(const LinearLogpConfig& c) {
  if (c.backward_workspace_bytes < 0) {
    throw Error(ErrorCode::kInvalidArgument, "LinearLogp config: backward_workspace_bytes = " +
                                                 std::to_string(c.backward_workspace_bytes) +
                                                 "; expected >= 0 (0: the default, 256 MiB)");
  }
  if (!std::isfinite(c.grad_filter_threshold) || c.grad_filter_threshold < 0.0f) {
    throw Error(ErrorCode::kInvalidArgument, "LinearLogp config: grad_filter_threshold = " +
                                                 std::to_string(c.grad_filter_threshold) +
                                                 "; expected a finite value >= 0 (0: no filtering)");
  }
  if (c.keep_logits_bytes < 0 && c.keep_logits_bytes != kKeepLogitsAuto) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp config: keep_logits_bytes = " + std::to_string(c.keep_logits_bytes) +
                    "; expected >= 0 (0: keep no more than the backward's buffers hold) or -1 (kKeepLogitsAuto, "
                    "the default: what holds the backward's buffers within 1 GiB)");
  }
}

std::int64_t backward_workspace_budget(const LinearLogpConfig& c) {
  return c.backward_workspace_bytes > 0 ? c.backward_workspace_bytes : kDefaultBackwardWorkspaceBytes;
}

BackwardChunk BackwardChunks::chunk(std::int64_t index) const {
  BackwardChunk chunk;
  chunk.begin = index * chunk_cols;
  const std::int64_t end = std::min((index + 1) * chunk_cols, vocab_local);
  chunk.cols = end - chunk.begin;
  return chunk;
}

bool backward_whole_shard_fits(const BackwardChunksInput& in) {
  if (in.whole_budget <= 0) return false;
  const std::int64_t rows = std::max<std::int64_t>(in.n_rows, 1);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(ceil_div(in.vocab_local, in.tile_cols), 1);
  return vocab_tiles <= kMaxTilesPerChunk &&
         in.whole_budget / (rows * static_cast<std::int64_t>(in.dz_elem_bytes)) >= vocab_tiles * in.tile_cols;
}

std::int64_t saturating_budget_sum(std::int64_t a, std::int64_t b) {
  return b > std::numeric_limits<std::int64_t>::max() - a ? std::numeric_limits<std::int64_t>::max() : a + b;
}

std::int64_t whole_shard_budget(const BackwardChunksInput& input, std::int64_t keep_bytes, std::int64_t max_rows) {
  BackwardChunksInput at_most = input;
  at_most.whole_budget = saturating_budget_sum(input.budget, keep_bytes);
  if (max_rows > 0) {
    at_most.n_rows = max_rows;
    if (!backward_whole_shard_fits(at_most)) return 0;
  }
  return at_most.whole_budget;
}

bool backward_chunk_fits(const BackwardChunksInput& in) {
  const std::int64_t rows = std::max<std::int64_t>(in.n_rows, 1);
  return in.budget / (rows * static_cast<std::int64_t>(in.dz_elem_bytes)) >= in.tile_cols || backward_whole_shard_fits(in);
}

BackwardChunks backward_chunks(const BackwardChunksInput& in) {
  BackwardChunks plan;
  plan.vocab_local = in.vocab_local;
  const std::int64_t rows = std::max<std::int64_t>(in.n_rows, 1);
  const auto elem = static_cast<std::int64_t>(in.dz_elem_bytes);
  if (!backward_chunk_fits(in)) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp backward: " + std::to_string(in.n_rows) + " rows need at least " +
                    std::to_string(rows * elem * in.tile_cols) + " bytes of dZ workspace (one column of " +
                    std::to_string(in.tile_cols) + "-wide tiles); backward_workspace_bytes allows " +
                    std::to_string(in.budget) +
                    (in.whole_budget > 0 ? " (with keep_logits_bytes, " + std::to_string(in.whole_budget) +
                                               " for the whole shard as one chunk)"
                                         : std::string()) +
                    ". Raise it or pass fewer rows per call");
  }
  // Widest chunk of whole tiles whose dZ fits the budget; the whole shard where whole_budget holds it.
  const std::int64_t max_tiles = std::min(in.budget / (rows * elem) / in.tile_cols, kMaxTilesPerChunk);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(ceil_div(in.vocab_local, in.tile_cols), 1);
  const std::int64_t widest_chunks = backward_whole_shard_fits(in) ? 1 : ceil_div(vocab_tiles, max_tiles);
  const std::int64_t widest_tiles = ceil_div(vocab_tiles, widest_chunks);
  // With three or more chunks the accumulator is there at the widest width already, so a
  // narrower width needs no buffer the widest does not (backward_chunks_reserve plans the
  // widest); a second kept chunk's bands are decided by the widest width below, for the same.
  const std::int64_t tiles_per_chunk = in.wave_resident > 0 && widest_chunks >= 3
                                           ? backward_chunk_tiles_by_waves(in, widest_tiles)
                                           : widest_tiles;
  // Elements between dZ rows for chunks of `tiles` tile columns: the first chunk's width rounded
  // up to a multiple of 8.
  auto dz_stride_of = [&](std::int64_t tiles) {
    return ceil_div(std::min(tiles * in.tile_cols, in.vocab_local), 8) * 8;
  };
  plan.chunk_cols = tiles_per_chunk * in.tile_cols;
  plan.chunks = ceil_div(in.vocab_local, plan.chunk_cols);
  plan.dz_stride = dz_stride_of(tiles_per_chunk);
  plan.dz_bytes = static_cast<std::size_t>(in.n_rows * plan.dz_stride * elem);
  if (in.filter) {
    plan.mask_bytes = static_cast<std::size_t>(ceil_div(rows, in.tile_rows) * tiles_per_chunk);
  }
  if (in.hidden_accumulator && plan.chunks > 1) {
    plan.accumulator_bytes = static_cast<std::size_t>(in.n_rows * in.hidden) * sizeof(float);
  }
  // A second kept chunk (chunk 1, not the last, so that it is whole) in the accumulator: its rows
  // of C = dz_stride 16-bit values, no longer than the accumulator's rows (2 C <= 4 H bytes). With
  // R = keep_band_rows and E = R x 2 C extra bytes, the logits start at O = N 4H + E - N 2C. The
  // band of rows [r, r + R) writes bytes [4H r, 4H (r + R)) and reads logits from O + 2C r on;
  // (r + R) 4H <= O + 2C r  <=>  E >= R 4H - (N - r)(4H - 2C), which holds with E = R 2C since
  // N - r >= R (the last band: rows [r, N), the same with N - r for R). Earlier bands' logits,
  // which the band may overwrite, were read by earlier launches.
  const std::int64_t chunk_row_bytes = plan.dz_stride * elem;
  const std::int64_t widest_row_bytes = dz_stride_of(widest_tiles) * elem;
  if (in.keep_band_rows > 0 && plan.accumulator_bytes > 0 && elem == 2 && plan.chunks >= 3 &&
      widest_row_bytes <= in.hidden * static_cast<std::int64_t>(sizeof(float))) {
    plan.kept_band_rows = in.keep_band_rows;
    // N 4H rounded up to 256 bytes, so that the logits (2C bytes a row, C a multiple of 8) start
    // on a 16-byte boundary, as TMA and the vector copies need; that only moves them further
    // from the bands' writes.
    const std::int64_t rows_bytes = ceil_div(in.n_rows * in.hidden * std::int64_t{sizeof(float)}, 256) * 256;
    const std::int64_t band_bytes = std::min(in.keep_band_rows, in.n_rows) * chunk_row_bytes;
    plan.accumulator_bytes = static_cast<std::size_t>(rows_bytes + band_bytes);
    plan.accumulator_kept_offset = plan.accumulator_bytes - plan.dz_bytes;
  }
  return plan;
}

double backward_chunks_wave_cost(const BackwardChunksInput& in, std::int64_t tiles) {
  const std::int64_t rows = std::max<std::int64_t>(in.n_rows, 1);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(ceil_div(in.vocab_local, in.tile_cols), 1);
  const BwdTileShape& gemm = in.gemm_tile;
  const std::int64_t dz_row_tiles = ceil_div(rows, in.tile_rows);
  const std::int64_t gemm_row_tiles = ceil_div(rows, gemm.rows);
  const std::int64_t hidden_tiles = ceil_div(in.hidden, gemm.cols);
  const double dz_area = static_cast<double>(in.tile_rows) * in.tile_cols;
  const double gemm_area = static_cast<double>(gemm.rows) * gemm.cols;
  auto waves = [&](std::int64_t grid) { return static_cast<double>(ceil_div(grid, in.wave_resident)); };
  auto chunk_cost = [&](std::int64_t chunk_tiles) {
    const std::int64_t cols = chunk_tiles * in.tile_cols;
    return dz_area * waves(dz_row_tiles * chunk_tiles) * (static_cast<double>(in.hidden) + kBwdEpilogueK.dz) +
           gemm_area * waves(ceil_div(cols, gemm.rows) * hidden_tiles) *
               (static_cast<double>(rows) + kBwdEpilogueK.grad_weight) +
           gemm_area * waves(gemm_row_tiles * hidden_tiles) * (static_cast<double>(cols) + kBwdEpilogueK.grad_hidden);
  };
  // Every chunk but the last is `tiles` wide: the cost takes two evaluations, whatever the vocabulary.
  const std::int64_t full = vocab_tiles / tiles;
  const std::int64_t last = vocab_tiles - full * tiles;
  return static_cast<double>(full) * chunk_cost(tiles) + (last > 0 ? chunk_cost(last) : 0.0);
}

std::int64_t backward_chunk_tiles_by_waves(const BackwardChunksInput& in, std::int64_t widest) {
  std::int64_t best = widest;
  double best_cost = backward_chunks_wave_cost(in, widest);
  const std::int64_t narrowest = std::max<std::int64_t>(ceil_div(widest * kNarrowestNum, kNarrowestDen), 1);
  for (std::int64_t tiles = widest - 1; tiles >= narrowest; --tiles) {
    const double cost = backward_chunks_wave_cost(in, tiles);
    if (cost < best_cost * (1.0 - kWaveGain)) {
      best = tiles;
      best_cost = cost;
    }
  }
  return best;
}

std::int64_t kept_band_rows_for(std::int64_t hidden, int tile_rows, int tile_cols, int resident) {
  const std::int64_t tiles_a_row = std::max<std::int64_t>(ceil_div(hidden, tile_cols), 1);
  return tile_rows * std::max<std::int64_t>(resident / tiles_a_row, 1);
}

BackwardChunks backward_chunks_reserve(const BackwardChunksInput& input) {
  // The widest chunks' buffers bound those of the width rule's (backward_chunks).
  BackwardChunksInput in = input;
  in.wave_resident = 0;
  BackwardChunks most = backward_chunks(in);
  // A call's chunks follow the widest chunk its rows allow, t tiles = budget / (rows x a tile
  // column's bytes a row). Among the row counts that allow the same t, the buffers grow with the
  // rows; so the largest row count of each t up to n_rows is the one to look at: t from the one
  // of n_rows (n_rows itself) up to where one chunk holds the whole vocabulary.
  const std::int64_t column_bytes = in.tile_cols * static_cast<std::int64_t>(in.dz_elem_bytes);
  const std::int64_t vocab_tiles = std::max<std::int64_t>(ceil_div(in.vocab_local, in.tile_cols), 1);
  const std::int64_t first = in.budget / (std::max<std::int64_t>(in.n_rows, 1) * column_bytes);
  auto raise_to = [&](std::int64_t rows) {
    BackwardChunksInput fewer = in;
    fewer.n_rows = std::min(in.n_rows, rows);
    const BackwardChunks plan = backward_chunks(fewer);
    most.dz_bytes = std::max(most.dz_bytes, plan.dz_bytes);
    most.mask_bytes = std::max(most.mask_bytes, plan.mask_bytes);
    most.accumulator_bytes = std::max(most.accumulator_bytes, plan.accumulator_bytes);
  };
  for (std::int64_t t = first + 1; t <= std::min(vocab_tiles, kMaxTilesPerChunk); ++t) {
    const std::int64_t rows = in.budget / (t * column_bytes);  // the most rows of t-tile chunks
    if (rows < 1) break;
    raise_to(rows);
  }
  // The most rows whose whole shard is one chunk by whole_budget: the largest such dZ buffer.
  const std::int64_t whole_rows = in.whole_budget / (vocab_tiles * column_bytes);
  if (whole_rows >= 1) raise_to(whole_rows);
  return most;
}

BwdGridSplit backward_grid_split(std::int64_t rows, std::int64_t cols, std::int64_t k, const BwdTileShape& tile,
                                 int resident, bool partial_waves, bool gemm,
                                 const kernels::StreamKClusters& clusters) {
  BwdGridSplit grid;
  const std::int64_t tile_rows = ceil_div(rows, tile.rows);
  grid.tiles = tile_rows * ceil_div(cols, tile.cols);
  if (grid.tiles > std::numeric_limits<int>::max()) return grid;  // never splits (stream_k_splits)
  const std::int64_t slices = std::min<std::int64_t>(ceil_div(k, tile.k), std::int64_t{1} << 30);
  grid.plan = kernels::plan_launch_stream_k(static_cast<int>(grid.tiles), static_cast<int>(slices), resident,
                                            static_cast<int>(tile_rows), gemm, partial_waves);
  if (gemm) grid.plan = kernels::cluster_stream_k(grid.plan, static_cast<int>(tile_rows), resident, clusters);
  return grid;
}

bool backward_splits_tiles(const BackwardChunks& plan, std::int64_t n_rows, std::int64_t hidden,
                           std::optional<BwdTileShape> dz, std::optional<BwdTileShape> gemm, int resident,
                           bool partial_waves, const kernels::StreamKClusters& clusters, bool rows_as_n,
                           std::int64_t l2_bytes) {
  if (n_rows <= 0 || plan.chunks <= 0) return false;
  auto splits = [&](std::int64_t rows, std::int64_t cols, std::int64_t k, const BwdTileShape& tile) {
    return backward_grid_split(rows, cols, k, tile, resident, partial_waves, false).plan.workers > 0;
  };
  // As the GEMM's launch plans it (launch_gemm): by row tiles, in clusters where they fit.
  auto gemm_splits = [&](std::int64_t rows, std::int64_t cols, std::int64_t k) {
    return backward_grid_split(rows, cols, k, *gemm, resident, partial_waves, true, clusters).plan.workers > 0;
  };
  // grad_hidden of `rows` rows over k: on the tiles of the rows as N where the rule takes them.
  auto hidden_splits = [&](std::int64_t rows, std::int64_t k) {
    const int bm = rows_as_n ? gemm_rows_as_n_rows(rows, hidden, k, resident, partial_waves, clusters, l2_bytes) : 0;
    if (bm == 0) return gemm_splits(rows, hidden, k);
    return gemm_rows_as_n_plan(rows, hidden, k, bm, resident, partial_waves, clusters).workers > 0;
  };
  for (const std::int64_t index : {std::int64_t{0}, plan.chunks - 1}) {
    const std::int64_t cols = plan.chunk(index).cols;
    if (dz && splits(n_rows, cols, hidden, *dz)) return true;
    if (gemm && (gemm_splits(cols, hidden, n_rows) || hidden_splits(n_rows, cols))) return true;
  }
  // A second kept chunk's grad_hidden product runs in bands of kept_band_rows rows: a whole band,
  // and the last one's rows. (Were one of them left out, it would split only once another call
  // had allocated the workspace, and a call's bits would depend on the calls before it.)
  if (gemm && plan.kept_band_rows > 0 && plan.chunks >= 2) {
    const std::int64_t cols = plan.chunk(1).cols;
    const std::int64_t last = n_rows % plan.kept_band_rows;
    if (hidden_splits(std::min(plan.kept_band_rows, n_rows), cols)) return true;
    if (last > 0 && hidden_splits(last, cols)) return true;
  }
  return false;
}

}  // namespace shardjit
