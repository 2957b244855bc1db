// Host side of templates/linear_logp/fwd.cuh and fwd_hopper.cuh: the fused GEMM + online
// log-sum-exp kernels that write per-row partial statistics for each vocabulary split.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "linear_logp/fwd_args.cuh"
#include "linear_logp/fwd_block_order.cuh"
#include "runtime/arch/arch.hpp"
#include "runtime/compile/kernel_spec.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/linear_logp/layout.hpp"

namespace shardjit {

struct FwdTile {
  int bm = 128;  // rows of X
  int bn = 128;  // vocabulary columns
  int bk = 64;
  int stages = 3;
  // The Hopper main loop (wgmma, sm_90a only; 128 x 256, 128 x 192, 128 x 128, or 136, 152 or
  // 168 x 128 x 64 tiles of 16-bit inputs) instead of the portable one
  // (templates/linear_logp/logit_mainloop.cuh).
  bool wgmma = false;
  // On the Hopper loop, the rows as wgmma's N (bm x 128 x 64, bm one of kFwdRowsAsNRows:
  // linear_logp_fwd_rows_as_n), so that a call of a few hundred rows is covered by tiles of about
  // its rows rather than by 128-row tiles padded past them (300 rows: 2 x 152, 333: 2 x 168, not
  // 3 x 128).
  bool rows_as_n = false;

  bool operator==(const FwdTile&) const = default;
};

// The Hopper main loop's tile where it applies (wgmma_applies): 128 x 256 x 64 with a ring of
// `stages` slots (what the kernel's shared memory leaves room for).
std::optional<FwdTile> hopper_logit_tile(DType dtype, const std::string& arch, bool hopper_path, int stages);

// The Hopper loop's other forward tiles, where that loop applies: 128 x 128 x 64 and 128 x 192 x 64
// with four stages, narrowest first, then (last) the tiles of the rows as N, bm x 128 x 64 for bm
// in kFwdRowsAsNRows, with kFwdRowsAsNStages. An op on the default tile also loads these, for the
// calls choose_fwd_plan gives them (other_tile_pays).
std::vector<FwdTile> hopper_other_fwd_tiles(DType dtype, const std::string& arch, bool hopper_path);

// The forward's tile for a dtype on an arch ("sm_80", "sm_90a", ...): the Hopper main loop's
// where it applies (hopper_logit_tile with four stages: the Hopper epilogue works in registers and
// leaves the whole shared memory to the ring), else the portable path's: for 16-bit inputs the fastest
// measured tile whose shared memory fits the arch's per-block limit (128 x 256 x 64, 3 stages,
// on Hopper; 128 x 256 x 32 on A100), for fp32 the deepest 128 x 128 x 32 pipeline that fits.
FwdTile default_fwd_tile(DType dtype, const std::string& arch, bool hopper_path);

// The portable path's tiles for 16-bit inputs, fastest first where they fit.
std::span<const FwdTile> portable_fwd_tiles();

// A kernel of the portable loops that recomputes logit tiles of the shard and is specialized for
// its shape (linear_logp_fwd, linear_logp_bwd_dz): the parameters they share (the input types,
// the shard, the tile), plus `own`.
KernelSpec logit_kernel_spec(const std::string& name, const LinearLogpLayout& layout, const FwdTile& tile,
                             std::vector<std::pair<std::string, ParamValue>> own);

// A kernel of the Hopper loop that recomputes logit tiles and takes the shard at run time
// (linear_logp_fwd_hopper, linear_logp_bwd_dz_hopper, linear_logp_fwd_keep): the input types and
// the tile, plus `own`. Its spec is the same for every model shape of the config's dtypes.
KernelSpec shape_free_logit_kernel_spec(const std::string& name, const LinearLogpConfig& config, const FwdTile& tile,
                                        std::vector<std::pair<std::string, ParamValue>> own);

// The forward's kernel of a tile: linear_logp_fwd_hopper on the Hopper loop (tile.wgmma), or
// linear_logp_fwd_rows_as_n for a tile of the rows as N, built once per dtype; else
// linear_logp_fwd, specialized for the shard. `keeps`: the rows-as-N kernel that also keeps the
// backward's one chunk (KEEP; fwd_column_keep.cuh), for a tile of the rows as N of
// kFwdRowsAsNKeepCols (128) columns only, and with entropy of at most kFwdKeepMostRowsWithEntropy
// rows (fwd_tile_keeps); another tile throws Error(kInternal).
KernelSpec linear_logp_fwd_spec(const LinearLogpLayout& layout, const FwdTile& tile, bool keeps = false);

// The most rows of a keeping forward's tile in an op with entropy. The 168-row keeping kernel with
// entropy spills (ptxas: 216 bytes with a bias, 152 without; 136 and 152 rows none) and ran fwd+bwd
// 1.2 % slower than keeping nothing in the forward, at 165 x 4096 x 32064 (H100, 2026-12-08).
inline constexpr int kFwdKeepMostRowsWithEntropy = 152;

// Whether a tile has a forward that keeps the backward's one chunk, in an op with or without
// entropy: the tiles of the rows as N of kFwdRowsAsNKeepCols columns, not those of 256
// (runtime/compile/template_registry.hpp), with entropy of kFwdKeepMostRowsWithEntropy rows at most.
bool fwd_tile_keeps(const FwdTile& tile, bool entropy);

// Of the tiles choose_fwd_plan may pick, those a forward that would keep the backward's one chunk
// itself plans among: the tiles of the rows as M (whose plan leaves the keep to the kept chunk's
// kernel) and those of the rows as N that fwd_tile_keeps, so that no plan of the rows as N there
// asks for a keeping kernel the op has none of.
std::vector<FwdTile> keeping_fwd_plan_tiles(std::span<const FwdTile> tiles, bool entropy);

unsigned linear_logp_fwd_smem(DType dtype, const FwdTile& tile);

// The vocabulary split counts the forward chooses from. Split s of S walks the vocabulary tiles
// [s P, (s + 1) P), P = ceil(V / S) (templates/linear_logp/fwd.cuh), and the combine kernel takes
// the number of partials as an argument, so any count would work; counts between these fill the
// last wave better on paper but ran slower, except the one-wave and one-tile counts below
// (docs/perf-notes.md, "Splits and block order").
inline constexpr std::array<int, 8> kVocabSplitChoices = {1, 2, 4, 8, 16, 32, 64, 128};

// kVocabSplitChoices plus, where they are other counts from 2 to vocab_tiles (more would leave
// splits empty):
// - the one-wave count floor(SMs / row tiles): one block per multiprocessor, every block of the
//   same length. At a few row tiles it ties a power of two on paper with fewer, longer blocks
//   (333 rows at llama3-8b on an H200: 44 splits 0.519 ms, the 128 it replaces 0.618 ms); at one
//   row tile it is every multiprocessor (132 on an H200), past the largest power of two;
// - the one-tile count, vocab_tiles, where row tiles x vocab_tiles blocks fit one wave: a block a
//   tile. Below a power of two a small shard otherwise ran half as many blocks of two tiles each
//   (at N = 1 on an H200, llama3-70b's TP8 shard of 63 tiles: 32 blocks, 2.52 x cuBLAS;
//   deepseek-v3's of 64 tiles: 64 one-tile blocks, 1.37 x; sweep of 2026-12-03).
// Ascending.
std::vector<int> vocab_split_candidates(std::int64_t row_tiles, std::int64_t vocab_tiles, int sm_count);

// A forward call's launch (templates/linear_logp/fwd_args.cuh, fwd_block_order.cuh).
struct VocabSplit {
  int splits = 1;
  // Row tiles of a group of the forward's block order (LinearLogpFwdArgs::group_rows): those a
  // wave of one block per multiprocessor holds, ceil(SMs / splits).
  int group_rows = 1;
  int row_tiles = 1;
  int vocab_tiles = 1;
  // Units (row tile, split) that run whole; the rest are cut into unit_pieces pieces each
  // (cut_last_waves). A plan that cuts nothing has whole_units = units() and unit_pieces = 1.
  int whole_units = 1;
  int unit_pieces = 1;
  // The columns of the tile the call runs (the op's, or one of its other tiles where
  // other_tile_pays): vocab_tiles counts tiles of this width.
  int tile_cols = 256;
  int tile_rows = 128;     // the tile's rows of X (row_tiles counts tiles of this height)
  bool rows_as_n = false;  // a tile of the rows as N (FwdTile::rows_as_n)

  int units() const { return row_tiles * splits; }
  // Partial sources the combine merges a row.
  int sources() const { return splits * unit_pieces; }
  int blocks() const { return whole_units + (units() - whole_units) * unit_pieces; }
  int split_tiles() const { return kernels::fwd_split_tiles(vocab_tiles, splits); }
};

// A tile's time over a 128 x 256 tile's at the same H on the Hopper loop:
// - 128 x 128: 0.64, as measured at 333 rows of TP8 shards on an H200 (0.62 at H = 7168, 0.66 at
//   8192): half the products, but X read from L2 once per vocabulary tile, twice as often;
// - 128 x 192: 0.79, as measured on an H100 where six tiles of 192 columns replaced five wide
//   ones (333 rows of 49152 and 50432 columns); 0.84 at 333 rows of TP8 shards, two against two,
//   where 126 blocks ran instead of 96. Estimated 0.81: three quarters of the products at the
//   shared memory's pace (both warpgroups read W's 192 rows, 104 KiB a 768-cycle slice with the
//   ring's writes, 139 bytes a cycle against 128).
// - 128 x 256: 1;
// - 168 x 128, the rows as N: kRowsAsNTileCost + kRowsAsNSliceCost / k_slices (the tile's K slices
//   of 64), 0.66 of the products: its fold by columns costs more beside a short K than the wide
//   tile's (0.73 at H = 4096, 0.80 at 2048, 0.70 at 8192). Fitted, with kRowsAsNBlockEnd, to 18
//   calls of 333 rows on an H100, the tiles of the rows as N against those of the rows as M (two
//   sweeps, 2026-12-06, corrected for the later start's 1.4 % at the calls whose plan was the same;
//   A/B runs): within 4 %, but +4 to +5 % at two tiles a block, which the fit overcharges. That was
//   0.67 on a ring of four stages; six (kFwdRowsAsNStages) took 4.5 to 9 % off calls of two row
//   tiles (H100 A/B, 2026-12-07, median 7 %): 0.62. The fold's instructions cut (fwd_column_fold.cuh;
//   ncu, H100, 2026-12-07: two tiles a block at K = 128 -5.6 %, 18 at K = 56 -2.3 %) fit 3.4 for
//   kRowsAsNSliceCost (4 before) and 0.20 for kRowsAsNBlockEnd (0.28); 3.5, since at 3.0 gemma2-2b's
//   333 rows (K = 36, 256000 columns) would take the rows as N, which measured 4 % slower there,
//   where the calls that 3.5 moves from the wide and 128 x 192 tiles measured 3.8 to 7.4 % faster.
// - 136 or 152 x 128, the rows as N: the products scaled from 168's by rows_as_n_slice_work (each
//   row of a narrower tile moves more shared memory), the fold by the rows. H100 A/B against 168 or
//   the wide tile: 260 and 300 rows of 3584- and 4096-wide heads 11 % and 8 % faster, 150 rows
//   within 1 to 3 % faster (2026-12-07).
// - BM x 256, the rows as N: the products scaled from 168 x 128's likewise (a 256-column tile moves
//   16 bytes a cycle less shared memory: 134 at 152 rows, against 150), and kRowsAsNWideFold times
//   168 x 128's fold by the rows: twice the columns, plus the merge of a row's lanes every tile
//   (fwd_column_fold.cuh). 2.5 by counting instructions; 3.0 fits the calls of many tiles a
//   multiprocessor (H100 A/B against 152 and 168 x 128 pinned, 2026-12-07: 300 x 3584 x 152064 and
//   333 x 4096 x 128256 measured -6.1 and -6.0 %, 3.0 gives -5.2 and -6.0 %).
// docs/perf-notes.md, "Forward tiles per call". Throws Error(kInternal) for another tile.
inline constexpr double kRowsAsNTileCost = 0.62;
inline constexpr double kRowsAsNSliceCost = 3.5;
inline constexpr int kRowsAsNFittedRows = 168;
inline constexpr double kRowsAsNWideFold = 3.0;
double fwd_tile_cost(int tile_rows, int tile_cols, bool rows_as_n, std::int64_t k_slices);

// What a block of the tiles of the rows as N costs beyond its tiles, in 128 x 256 tile times: its
// end, where its rows' statistics are merged through shared memory (fwd_column_fold.cuh), against
// the wide tile's merge in registers (fit above, at 168 rows; scaled by the rows).
inline constexpr double kRowsAsNBlockEnd = 0.20;

// The blocks a plan's busiest multiprocessor runs, one after another: a wave of whole units each,
// then a wave of pieces each.
std::int64_t fwd_plan_busiest_blocks(const VocabSplit& plan, int sm_count);

// The K slices of a row of `row_bytes` bytes on the Hopper loop: 64 16-bit elements, 128 bytes,
// a slice; what choose_fwd_plan weighs the tiles' costs at.
constexpr std::int64_t fwd_k_slices(std::int64_t row_bytes) { return (row_bytes + 127) / 128; }

// A plan's time in 128 x 256 tile times at K slices of 64 elements a tile: its busiest
// multiprocessor's tiles (fwd_plan_busiest_tiles) at fwd_tile_cost each, and for the tiles of the
// rows as N kRowsAsNBlockEnd a block of it.
double fwd_plan_time(const VocabSplit& plan, int sm_count, std::int64_t k_slices);

// Whether a call whose `wide` plan (in the op's 128 x 256 tile) runs one wave of whole units runs
// `other` (a plan in one of the op's other tiles) instead, each as the op would launch it:
// - at one row tile, where `other` is the narrowest of the op's tiles of the rows as M (`narrowest`;
//   never a tile of the rows as N, whose 136 or more rows would only pad more). Such a call reads W at the
//   memory's pace (at most 128 flop a byte of W, under the tensor cores' ~180 a byte of HBM on an
//   H200), and narrow tiles never give its busiest multiprocessor more of W to read (a split of
//   ceil(2 T / S) narrow tiles against ceil(T / S) wide ones): 149 wide tiles of a 38016-column
//   shard run two a block on 75 multiprocessors, 297 narrow ones three on 99. Where both read as
//   much, a block of two narrow tiles folds one while it loads the next: 128 rows of a
//   32000-column head ran 7 % faster on an H100 (docs/perf-notes.md, "Forward tiles per call");
// - at more row tiles, where the other plan's busiest multiprocessor ends at least
//   kOtherTileGain sooner than the wide plan's (fwd_plan_time at k_slices). The wide tile's one
//   wave leaves multiprocessors idle there (189 tiles of 128 x 256 at 333 rows of a 16032-column
//   shard take two tile times on 132 multiprocessors where 1.43 would do), and narrower tiles fill
//   them in finer steps. A plan of the rows as N counts only where its busiest multiprocessor runs
//   kRowsAsNFittedBusiestTiles tiles or more, as in the calls its costs were fitted to: at one tile a
//   multiprocessor (150 rows of the TP8 shards of 16032 and 16160 columns, 127 tiles of 152 x 128
//   where the wide plan ran 128 of 128 x 256) it ran 7 to 9 % slower than the wide plan, not the 9 %
//   faster the costs give (H100 sweeps, 2026-12-07). So too in 256-column tiles: one a
//   multiprocessor against two of 128 columns, the costs' 7 % gain measured -1.7 to -2.9 % at
//   300 and 333 rows of 7168- and 8192-wide TP8 shards, +6.6 % at 150 rows of a 3072-wide head
//   (H100 A/B, 2026-12-07).
inline constexpr double kOtherTileGain = 0.03;
inline constexpr std::int64_t kRowsAsNFittedBusiestTiles = 2;
bool other_tile_pays(const VocabSplit& wide, const VocabSplit& other, bool narrowest, int sm_count,
                     std::int64_t k_slices);

// The vocabulary tiles a plan's busiest multiprocessor runs, one block after another: a split's
// tiles for each wave of whole units, then, where cut_last_waves cut the last units, a piece's
// tiles for each wave of pieces (an upper bound: pieces go to the multiprocessors as they free up).
std::int64_t fwd_plan_busiest_tiles(const VocabSplit& plan, int sm_count);

// What the split choice needs to know of the GPU.
struct GpuShape {
  int sm_count = 132;
  std::int64_t l2_bytes = 50ll << 20;
};

// The splits of a row tile that read its K slices together in a plan of one wave, so that X comes
// from memory at a kXSharingSplits-th of the tile stream's X bytes or less, even where the
// running row tiles miss L2: with 128-row tiles of 16-bit X at the tensor cores' full rate, about
// a fifth of an H100's memory bandwidth. Such a plan comes before counts of several waves.
inline constexpr int kXSharingSplits = 4;

// The share of the L2 the running row tiles of X may take over several waves: 1 / this. Half the
// L2 held 8 splits' 17 row tiles at H = 4096, and at 32768 rows the forward then read 126 GB of
// DRAM for 1.3 GB of operands (ncu, H200) and ran 1.22-1.29 x cuBLAS on an H100 against 0.99-1.03
// x on 16 splits; at H = 7168 and 8192, 16384 rows, 64 splits ran 1.07-1.13 x against 1.04 x on
// the 32 whose rows fit a quarter (docs/perf-notes.md, "Splits and block order").
inline constexpr int kRunningXL2Share = 4;

// The split count for n_rows rows of `row_bytes` bytes (H x element size) over `valid_local`
// vocabulary columns: among the counts of vocab_split_candidates (up to max_splits, by default
// what one combine merges) whose efficiency as launched (fwd_plan_efficiency, after
// cut_last_waves where `cuts_last_waves`) is within `tolerance` of the best, the fewest that runs
// in one wave with kXSharingSplits splits or more, or whose concurrently running row tiles of X
// fit in a kRunningXL2Share-th of the L2 (so X is read from DRAM about once, not once per tile);
// where none does, the fullest count that fits (fwd.cpp says why). Tensor parallelism passes a
// wider tolerance (there every split also travels to the other ranks), a cap that keeps tp x
// splits within what one combine merges, and no cut. The plan runs every unit whole;
// cut_last_waves may then cut the last ones.
VocabSplit choose_vocab_splits(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local,
                              const FwdTile& tile, const GpuShape& gpu, double tolerance = 0.02,
                              int max_splits = kMaxCombineSources, bool cuts_last_waves = true);

// A plan of exactly `splits` splits (at most the vocabulary tiles and kMaxCombineSources), every
// unit whole: the rule's alternative under SHARDJIT_FWD_SPLITS, for comparing split counts the
// rule does not choose (every multiprocessor's count, or more splits than multiprocessors).
VocabSplit fixed_vocab_splits(std::int64_t n_rows, std::int64_t valid_local, const FwdTile& tile, const GpuShape& gpu,
                              int splits);

// A call's launch over the shard's columns from first_col on: choose_vocab_splits's plan in
// `tile`, cut by cut_last_waves, or the same in one of `others` (the op's other tiles,
// hopper_other_fwd_tiles) where the plan in `tile` runs one wave of whole units and other_tile_pays: of those, the
// one whose busiest multiprocessor ends first (fwd_plan_time). A tile whose width does not
// divide first_col (the end of the kept chunks) is left out.
VocabSplit choose_fwd_plan(std::int64_t n_rows, std::int64_t row_bytes, std::int64_t valid_local, const FwdTile& tile,
                           std::span<const FwdTile> others, const GpuShape& gpu, std::int64_t first_col = 0);

// Cuts the units of the last two waves (the last full wave of one block a multiprocessor and the
// partial one after it) into pieces of about kFwdPieceTiles tiles, one block each
// (templates/linear_logp/fwd_block_order.cuh says why), where there is more than one wave of
// units and a split has at least two pieces of tiles; otherwise returns `plan` as it is. The
// pieces multiply the partial sources of a split, so tensor parallelism, whose partials cross
// NVLink, does not cut.
VocabSplit cut_last_waves(VocabSplit plan, int sm_count);
// About a fifth of a multiprocessor's share of a 16k-row forward's tiles at llama3-8b: long
// enough that a block's fixed costs (prologue, partial store) stay near 1 %, short enough that
// the last blocks end within a few percent of the kernel of each other.
inline constexpr int kFwdPieceTiles = 8;

// Useful tile work over the tile slots the plan occupies: the row tiles' vocabulary tiles over the
// multiprocessors times the busiest one's tiles (fwd_plan_busiest_tiles). For a plan that runs
// every unit whole, the waves of units times a split's tiles.
double fwd_plan_efficiency(const VocabSplit& plan, int sm_count);

// The most partial rows (sources x rows) any call of up to n_rows rows needs, given the partial
// sources a call of `rows` rows writes. The forward kernel's depend on the rows only through the
// number of BM-row tiles, so every tile count is visited (a few thousand at most); the kept
// chunks' also through their width, which narrows as the rows grow, so each tile is counted at
// its most rows with the larger of its first and last row counts' sources.
std::int64_t max_partial_rows(std::int64_t n_rows, int bm, const std::function<int(std::int64_t)>& sources_for);

// What the arguments of every kernel that recomputes logit tiles hold alike (the forward's,
// kernels::LinearLogpFwdArgs, and the dZ kernels', LinearLogpBwdDzArgs): a call of n rows of `in`
// (row strides in elements) and the shard (its first token id, its valid columns, 1 / T).
template <class LogitArgs>
void set_logit_inputs(LogitArgs& args, const LinearLogpLayout& layout, const LinearLogpInputs& in, std::int64_t n,
                      std::int64_t hidden_stride, std::int64_t weight_stride) {
  const LinearLogpConfig& c = layout.config;
  args.hidden = in.hidden.data;
  args.weight = in.weight.data;
  args.bias = c.bias_dtype ? in.bias.data : nullptr;
  args.targets = in.targets.data;
  args.n_rows = n;
  args.hidden_stride = hidden_stride;
  args.weight_stride = weight_stride;
  args.vocab_start = c.vocab_start;
  args.valid_local = static_cast<int>(layout.valid_local);
  args.inv_temperature = 1.0f / c.temperature;
}

// The forward kernel's arguments for a call of n rows of `in` (row strides in elements), writing
// `partials` in `plan`'s split, with the shape the Hopper kernel takes at run time (H, the
// shard's valid columns). first_tile is 0: an op that keeps chunks sets it (linear_logp.cpp).
kernels::LinearLogpFwdArgs linear_logp_fwd_args(const LinearLogpLayout& layout, const LinearLogpInputs& in,
                                                std::int64_t n, std::int64_t hidden_stride, std::int64_t weight_stride,
                                                kernels::RowPartial* partials, const VocabSplit& plan);

// Whether the Hopper forward kernel merges a call's partials itself (templates/linear_logp/
// fwd_merge.cuh) rather than a combine kernel after it: where every row tile's merge is one pass
// of the block's compute threads, a row to a group of combine_lanes_per_row(sources) lanes. The
// merge runs in the row tile's last block, after its own tiles, and each further pass adds its
// latency there; the combine kernel's blocks take one pass each, side by side.
bool fwd_merges_in_kernel(std::int64_t n_rows, int bm, int sources);

// One block for each unit and piece of `plan` (VocabSplit::blocks), of the kernel built for `tile`
// and `layout`, with linear_logp_fwd_smem's shared memory; the Hopper loop's TMA maps are encoded
// here, from the arguments' pointers (encode_fwd_tensor_maps: X's last row tile in a box of its
// rows rounded up to 8).
void launch_linear_logp_fwd(const LoadedKernel& kernel, const kernels::LinearLogpFwdArgs& args,
                            const VocabSplit& plan, const LinearLogpLayout& layout, const FwdTile& tile,
                            CUstream stream);

}  // namespace shardjit
