// How a LinearLogp backward call is cut into vocabulary chunks, so that dZ never takes more than
// the configured workspace: plain arithmetic, checked once per call, no device needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/stream_k.cuh"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

inline constexpr std::int64_t kDefaultBackwardWorkspaceBytes = std::int64_t{256} << 20;

// The backward options of a config; throws Error(kInvalidArgument) naming the field.
void check_backward_config(const LinearLogpConfig& config);

// config.backward_workspace_bytes, or the default when it is 0.
std::int64_t backward_workspace_budget(const LinearLogpConfig& config);

struct BackwardChunk {
  std::int64_t begin = 0;  // shard column of the chunk's column 0
  std::int64_t cols = 0;
};

struct BackwardChunks {
  std::int64_t chunk_cols = 0;     // columns of every chunk but the last (a multiple of the tile)
  std::int64_t chunks = 0;
  std::int64_t vocab_local = 0;    // columns the chunks cover, from 0
  std::int64_t dz_stride = 0;      // elements between rows of the dZ buffer, a multiple of 8
  std::size_t dz_bytes = 0;        // the dZ buffer: n_rows x dz_stride elements
  std::size_t mask_bytes = 0;      // filtering: a byte per dZ tile of a chunk
  std::size_t accumulator_bytes = 0;  // fp32 [n_rows, hidden] for grad_hidden across chunks
  // Where the accumulator's memory holds chunk 1's logits when a forward keeps a second chunk
  // (0 rows: it cannot). Between a forward and its backward the accumulator holds nothing, and a
  // chunk's 16-bit values (dz_bytes, the dZ buffer's shape) fit in its fp32 rows when the chunk is
  // at most 2 x hidden wide. They lie at its end, from accumulator_kept_offset on; the backward's
  // first grad_hidden product, chunk 1's, is launched kept_band_rows rows at a time and writes its
  // fp32 rows from the accumulator's start, each band over logits that earlier bands have read:
  // the accumulator is min(kept_band_rows, n_rows) x chunk_cols x 2 bytes longer than its rows
  // (rounded up to 256 bytes) for that (backward_chunks; the inequality is in its comment).
  std::int64_t kept_band_rows = 0;
  std::size_t accumulator_kept_offset = 0;

  BackwardChunk chunk(std::int64_t index) const;
};

// A Hopper kernel's tile, for backward_splits_tiles and the chunk width rule: its rows, columns
// and K slice.
struct BwdTileShape {
  int rows = 128;
  int cols = 256;
  int k = 64;
};

struct BackwardChunksInput {
  std::int64_t n_rows = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab_local = 0;
  std::size_t dz_elem_bytes = 2;
  int tile_rows = 128;      // the dZ kernel's tile
  int tile_cols = 128;
  std::int64_t budget = kDefaultBackwardWorkspaceBytes;  // bytes the dZ buffer may take
  bool hidden_accumulator = false;  // grad_hidden of a 16-bit dtype is accumulated in fp32
  bool filter = false;
  // > 0: the op keeps chunks from the forward, and the first grad_hidden product runs in bands of
  // this many rows (kept_band_rows_for) when the accumulator holds a second kept chunk.
  std::int64_t keep_band_rows = 0;
  // > 0 (ops that keep chunks: budget + the keep budget): a call whose whole shard of dZ fits in
  // this many bytes takes it as one chunk, which its forward then keeps whole, rather than
  // chunks of `budget` of which it would recompute at least one. The memory is what the two
  // budgets allow together, spent in the dZ buffer instead of the keep buffer.
  std::int64_t whole_budget = 0;
  // > 0: the blocks of a Hopper backward kernel that run at once, for the chunk width rule
  // (backward_chunk_tiles_by_waves: of three or more chunks, a narrower width where the dZ,
  // grad_weight and grad_hidden grids, gemm_tile's for the GEMMs, fill their waves better by a
  // margin). 0: the widest chunks.
  int wave_resident = 0;
  BwdTileShape gemm_tile{};
};

// Rows of one band of the backward's first grad_hidden product when the accumulator holds a
// second kept chunk: the row tiles whose tiles (hidden / tile_cols a row tile) one wave of
// `resident` blocks runs, at least one row tile. A band a launch, so a band's output is written
// only after the bands before it have read their logits (stream order).
std::int64_t kept_band_rows_for(std::int64_t hidden, int tile_rows, int tile_cols, int resident);

// The split along K (templates/common/stream_k.cuh, by its rule `partial_waves`) of a Hopper
// backward kernel over [rows x cols] outputs and K = k in `tile`s on `resident` blocks: its tile
// count and plan (workspace pointers unset), as its launch plans it (StreamKWorkspace::plan, the
// GEMM's `row_major`). A grid of more tiles than an int holds is never split.
struct BwdGridSplit {
  std::int64_t tiles = 0;
  kernels::StreamKPlan plan{};
};
// `clusters` (those the GEMMs may run in, StreamKWorkspace::clusters): for a `gemm`, the plan in
// clusters where cluster_stream_k finds some, as launch_gemm makes it.
BwdGridSplit backward_grid_split(std::int64_t rows, std::int64_t cols, std::int64_t k, const BwdTileShape& tile,
                                 int resident, bool partial_waves, bool gemm,
                                 const kernels::StreamKClusters& clusters = {});

// Whether a Hopper kernel of a call of n_rows rows splits its tiles along K (templates/common/
// stream_k.cuh, by its rule `partial_waves`) on `resident` blocks, and so needs the split
// workspace: per chunk, dZ [n_rows x cols] over K = hidden, grad_weight [cols x hidden] over
// K = n_rows, grad_hidden [n_rows x hidden] over K = cols, and where a second kept chunk lies in
// the accumulator its grad_hidden bands (kept_band_rows rows each). A kernel left out (no value)
// runs the portable loop. Every chunk but the last has the first's width. `clusters`: those the
// GEMMs may run in (StreamKWorkspace::clusters), which split grids of less than a wave too.
// `rows_as_n`: grad_hidden takes the tiles of the rows as N where gemm_rows_as_n_rows finds them
// faster on a device of `l2_bytes` of L2, split as plan_rows_as_n splits them
// (templates/common/stream_k.cuh).
bool backward_splits_tiles(const BackwardChunks& plan, std::int64_t n_rows, std::int64_t hidden,
                           std::optional<BwdTileShape> dz, std::optional<BwdTileShape> gemm, int resident,
                           bool partial_waves = true, const kernels::StreamKClusters& clusters = {},
                           bool rows_as_n = false, std::int64_t l2_bytes = 0);

// Whether one column of dZ tiles of input.n_rows rows fits the budget, or the whole shard fits
// input.whole_budget: what backward_chunks needs.
bool backward_chunk_fits(const BackwardChunksInput& input);

// Whether the whole shard of dZ of input.n_rows rows is one chunk by input.whole_budget.
bool backward_whole_shard_fits(const BackwardChunksInput& input);

// a + b for budgets (both >= 0), at most INT64_MAX: a keep budget of INT64_MAX means "no limit".
std::int64_t saturating_budget_sum(std::int64_t a, std::int64_t b);

// The whole_budget of an op that keeps chunks, for `input` (its shape, budget and rows):
// backward_workspace_bytes + keep_bytes, the keep budget (keep_logits_budget). With
// max_rows > 0, 0 unless a call of max_rows rows is itself one whole chunk by it: an op built
// with max_rows reserves its buffers at build for every call up to max_rows, and the
// whole-shard dZ of smaller calls would take the keep budget that calls of max_rows rows (what
// such an op mostly runs) use for further chunks.
std::int64_t whole_shard_budget(const BackwardChunksInput& input, std::int64_t keep_bytes, std::int64_t max_rows);

// Chunks as wide as the budget allows (whole tiles, balanced so that the last is not a sliver),
// or one chunk of the whole shard where it fits input.whole_budget; with input.wave_resident and
// three or more such chunks, down to three quarters as wide where that fills the kernels' waves
// better (backward_chunk_tiles_by_waves; the last chunk is then what remains, which may be
// narrow). A second kept chunk's bands are allowed where the widest chunks' rows would fit the
// accumulator's, so that the widest plan's buffers bound the rule's. Throws
// Error(kInvalidArgument) when not even one column of tiles fits the budget.
BackwardChunks backward_chunks(const BackwardChunksInput& input);

// The rule's estimate of a backward's block-time over chunks of `tiles` dZ tile columns each
// (the last one what remains), in tile-slices of K: per chunk and kernel, the waves of its grid
// on input.wave_resident blocks times a tile's K plus its epilogue's cost in K (kBwdEpilogueK).
double backward_chunks_wave_cost(const BackwardChunksInput& input, std::int64_t tiles);

// The chunk width, in dZ tile columns, that backward_chunks takes for `input` given the widest
// balanced width `widest` (tiles): walking the widths from widest - 1 down to 3/4 of widest, each
// one whose estimated cost is more than 1.5 % below the best width so far becomes the best.
std::int64_t backward_chunk_tiles_by_waves(const BackwardChunksInput& input, std::int64_t widest);

// The chunks of a call of input.n_rows rows, with their buffer sizes (dz_bytes, mask_bytes,
// accumulator_bytes) raised to the largest that any call of 1..n_rows rows needs: fewer rows get
// wider chunks, so a smaller call can need a larger dZ buffer. What an op built with max_rows
// reserves, so that no call up to max_rows grows a buffer (and none does under graph capture).
BackwardChunks backward_chunks_reserve(const BackwardChunksInput& input);

}  // namespace shardjit
