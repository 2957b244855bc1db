// Which tiles, and which K slices of them, each block of a Hopper kernel computes (the Hopper
// GEMM and dZ kernels), so that a grid whose last wave would leave many multiprocessors idle still
// keeps them busy.
//
// At llama3-8b-decode (256 rows) grad_hidden is 32 tiles of 2004 K slices: one block a tile
// would leave 100 of 132 multiprocessors idle for the whole kernel. At 1100 rows it is 144 tiles:
// a full wave, then 12 tiles on 12 multiprocessors for as long again. A plan has two parts:
//
//   tiles [0, whole_tiles)      computed whole: block b takes tiles b, b + grid, ...;
//   tiles [whole_tiles, tiles)  their K slices taken as one sequence, tile after tile, and cut
//                               into `workers` equal runs, one a block ("stream-K").
//
// Unsplit, every tile is whole. A grid of at most half as many tiles as the blocks that run at
// once is split whole (no whole tiles); one of more than a wave keeps its full waves whole and
// splits the tiles of its last wave among the blocks (over two row tiles or more, as many as give
// each tile the same number of runs: split_last_wave_alike), which reach them together after the
// full waves, where the unsplit launch would leave at least a quarter of its block-time idle
// (stream_k_splits): a few waves whose last is mostly empty, never a grid of many waves, whose
// split runs would start at scattered K offsets and stop sharing their operands' K slices in L2
// (docs/perf-notes.md, "Stream-K", has what was measured).
//
// A run covers parts of one to a few tiles. A tile cut between runs (its pieces) is finished by
// the last of its pieces to arrive (templates/common/stream_k_fixup.cuh): every piece stores its
// fp32 partial sums, and the last one adds them all in piece order, so that the sums are the same
// whichever piece arrives last, and no block ever waits for another.
//
// The runs of a split plan advance through K at the same pace, so tiles whose slices are a whole
// number of runs apart in the sequence read the same K slice at about the same time, and one
// read from memory serves them all through L2. A GEMM split whole walks its tiles row after row
// (row_major_tile_index, common/tile_order.cuh), so the row tiles of one output column lie
// tiles_n tiles, workers / tiles_m runs, apart; the plan takes a multiple of tiles_m workers
// (row_tiles) to make that whole. For grad_hidden at a few hundred rows (B = W, the largest
// operand) that is what lets the row tiles share W's reads; they share them only while their
// blocks keep in step, which they do not hold for long (docs/perf-notes.md, "Stream-K", has
// what was measured).
//
// Keeping them in step is what clusters do (cluster_stream_k): the blocks of a cluster take the
// runs of one column in consecutive row tiles (all of them, or a divisor of them), and each block
// copies a part of the B slices that all of them read into every block of the cluster
// (templates/gemm/gemm_tma.cuh), so B comes from memory once for the cluster's row tiles and no
// block runs ahead of its peers by more than the ring. With clusters, a GEMM of fewer tiles than
// a wave but more than half of one, which would leave many blocks idle unsplit, is split whole too.
//
// Plain C++ too: the host builds the plan (plan_stream_k) and the host tests walk it.
#pragma once

#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// Built on the host for each launch; part of the kernel's parameter.
struct StreamKPlan {
  int tiles;                // of the kernel's tile order
  int slices;               // K slices a tile
  int whole_tiles;          // tiles [0, whole_tiles) are computed whole; the rest are split
  int workers;              // blocks that split the rest, one run each; 0 when nothing is split
  float* partials;          // 2 x workers tiles of fp32 partial sums (StreamKFixup)
  unsigned int* arrivals;   // a counter a split tile, zero between launches
  int cluster;              // blocks a cluster sharing B's slices (cluster_stream_k); <= 1: none
  int row_runs;             // clustered: the runs of a row tile (workers / row tiles)
};

// Part of one tile a block computes: K slices [begin, end) of tile `tile`; `worker` is the block's
// run for a tile of the split part, < 0 for a whole tile.
struct TileSegment {
  int tile;
  int begin;
  int end;
  int worker;
};

// Split runs shorter than this many slices cost more in partial sums than they gain.
constexpr int kStreamKMinSlices = 8;

// The full waves of `tiles` tiles on `resident` blocks.
SHARDJIT_HOST_DEVICE inline int stream_k_full_waves(int tiles, int resident) {
  return resident > 0 ? tiles / resident : 0;
}

// Whether `tiles` tiles of `slices` K slices on `resident` blocks (the blocks that run at once)
// are split: below one wave, when they are at most half the blocks; above it, when the unsplit
// launch, ceil(tiles / resident) waves, would leave at least a quarter of its block-time idle in
// its last wave (never with three full waves or more); and the split tiles have K to split.
// `partial_waves` false: only grids of at most half the blocks, split whole (the rule kept for
// comparisons, SHARDJIT_SPLIT_PARTIAL_WAVES=0).
SHARDJIT_HOST_DEVICE inline bool stream_k_splits(int tiles, int slices, int resident, bool partial_waves = true) {
  if (tiles <= 0 || slices <= 0 || resident <= 0) return false;
  const int full = stream_k_full_waves(tiles, resident);
  // Less than a wave: at most half the blocks (split whole, 72-80 tiles of 132 showed no gain).
  if (!partial_waves || full == 0) {
    return 2LL * tiles <= resident && static_cast<long long>(tiles) * slices >= 2 * kStreamKMinSlices;
  }
  const int last = tiles - full * resident;  // tiles of the last wave
  // idle share (resident - last) / ((full + 1) resident) >= 1 / 4
  return last > 0 && 4LL * (resident - last) >= static_cast<long long>(full + 1) * resident &&
         static_cast<long long>(last) * slices >= 2 * kStreamKMinSlices;
}

// The plan of such a launch; the caller sets the workspace pointers. `row_tiles`: the row tiles
// of a kernel that walks a plan split whole row after row (row_major_tile_index); the workers
// are a multiple of them where there are at least as many.
SHARDJIT_HOST_DEVICE inline StreamKPlan plan_stream_k(int tiles, int slices, int resident, int row_tiles = 1,
                                                      bool partial_waves = true) {
  StreamKPlan plan{tiles, slices, tiles, 0, nullptr, nullptr, 1, 0};
  if (!stream_k_splits(tiles, slices, resident, partial_waves)) return plan;
  plan.whole_tiles = stream_k_full_waves(tiles, resident) * resident;
  const long long most = static_cast<long long>(tiles - plan.whole_tiles) * slices / kStreamKMinSlices;
  int workers = static_cast<int>(most < resident ? most : resident);
  if (plan.whole_tiles == 0 && row_tiles > 1 && workers >= row_tiles) workers -= workers % row_tiles;
  plan.workers = workers;
  return plan;
}

// `plan` with a last wave split behind full waves, in a grid of `row_tiles` row tiles (two or
// more), cut into the same number of runs on every split tile where that is two or more (the
// workers a multiple of the split tiles): a column's row tiles, which read the same K slices of
// its operand, then start each slice together, where runs that straddle tiles would start them at
// scattered offsets and read the operand from memory once a row tile. With one row tile the split
// tiles share only the small operand, and the plan keeps all its runs. What both the GEMM's and
// the dZ kernels' launches plan (plan_launch_stream_k).
SHARDJIT_HOST_DEVICE inline StreamKPlan split_last_wave_alike(StreamKPlan plan, int row_tiles) {
  const int split = plan.tiles - plan.whole_tiles;
  if (plan.whole_tiles > 0 && plan.workers > 0 && row_tiles > 1 && plan.workers / split >= 2) {
    plan.workers -= plan.workers % split;
  }
  return plan;
}

// The plan of a GEMM or dZ launch of `row_tiles` row tiles: plan_stream_k, split whole on a
// multiple of the row tiles where the kernel walks such a plan row after row (`row_major`: the
// GEMM), then its last wave cut alike on every tile. The launches (StreamKWorkspace::plan), the
// backward's plan estimates (backward_grid_split) and the GEMM's choice of tiles
// (gemm_rows_as_n_rows) all plan through it.
SHARDJIT_HOST_DEVICE inline StreamKPlan plan_launch_stream_k(int tiles, int slices, int resident, int row_tiles,
                                                             bool row_major, bool partial_waves) {
  return split_last_wave_alike(plan_stream_k(tiles, slices, resident, row_major ? row_tiles : 1, partial_waves),
                               row_tiles);
}

// Whether every tile of the plan is split (none whole): the form whose GEMM walks its tiles row
// after row.
SHARDJIT_HOST_DEVICE inline bool stream_k_split_whole(const StreamKPlan& plan) {
  return plan.workers > 0 && plan.whole_tiles == 0;
}

// The most blocks a cluster takes by default (cluster_blocks_by_rule). Against the same plans
// without clusters (fwd+bwd, one H100, 2026-12-06): clusters of all 2 to 5 row tiles 7-20 %
// faster, of 7 6 % (grad_hidden at 256-896 rows); of 8 3-15 % slower (960 and 1024 rows at H 2048).
constexpr int kStreamKMaxCluster = 7;
// The most a cluster may take at all (the portable limit), for experiments.
constexpr int kStreamKMaxClusterBlocks = 8;

// The clusters a kernel's plans may take: how many clusters of 1 to kStreamKMaxClusterBlocks
// blocks of it the device runs at once, by blocks a cluster (0: none, as when clusters are off;
// a cluster of one block is a block alone), and a cluster's blocks where they divide a plan's row
// tiles (0: cluster_blocks_by_rule's; 1: the same splits, each block alone, on as many blocks as
// fit, for comparisons).
struct StreamKClusters {
  int resident[kStreamKMaxClusterBlocks + 1];
  int blocks;
};

// The workers of a plan split whole over `row_tiles` row tiles in clusters of `blocks` (a divisor
// of them): at most `most`, and at most the blocks of the clusters that run at once, so that
// every cluster runs at once; a multiple of the row tiles, which keeps a column's row tiles whole
// runs apart (0: none fit).
SHARDJIT_HOST_DEVICE inline int stream_k_cluster_workers(int most, int row_tiles, int blocks,
                                                         const StreamKClusters& clusters) {
  const int fit = min_int(most, clusters.resident[blocks] * blocks);
  return fit - fit % row_tiles;
}

// The clusters of a plan over `row_tiles` row tiles, by rule. A plan split whole (at most half a
// wave of tiles) takes clusters of all its row tiles, up to kStreamKMaxCluster: a few hundred rows,
// where B's reads bound the split. A grid of more tiles but less than a wave (`below_wave`), which
// is not split otherwise, takes the divisor of its row tiles up to kStreamKMaxCluster whose
// clusters keep the most blocks busy (the larger on a tie): there the products bound it and the
// clusters halve B's reads at least. 0: none.
SHARDJIT_HOST_DEVICE inline int cluster_blocks_by_rule(int row_tiles, bool below_wave, int most,
                                                       const StreamKClusters& clusters) {
  if (!below_wave) return row_tiles <= kStreamKMaxCluster && clusters.resident[row_tiles] > 0 ? row_tiles : 0;
  int best = 0, best_workers = 0;
  for (int blocks = 2; blocks <= kStreamKMaxCluster; ++blocks) {
    if (row_tiles % blocks != 0 || clusters.resident[blocks] <= 0) continue;
    const int workers = stream_k_cluster_workers(most, row_tiles, blocks, clusters);
    if (workers >= best_workers && workers > 0) best = blocks, best_workers = workers;
  }
  return best;
}

// `plan` of `row_tiles` row tiles run in clusters that share B's slices, where it is split whole
// row after row or, unsplit, has fewer tiles than `resident` blocks, the clustered workers being
// at least a third more than its tiles (it is then split whole, as plan_stream_k splits grids of
// at most half a wave). Below that the split did not pay for its cost: 96 tiles of H 8192 at 333
// rows ran 0.6-6 % faster whole than on 117 blocks in clusters of three, 72 tiles 8-10 % slower
// whole than on 117 or 128 (fwd+bwd, H100; docs/perf-notes.md, "Stream-K"). The blocks of a
// cluster take the same K slices of one column in consecutive row tiles (stream_k_block_worker).
// The plan is left as it is where no cluster fits.
SHARDJIT_HOST_DEVICE inline StreamKPlan cluster_stream_k(StreamKPlan plan, int row_tiles, int resident,
                                                         const StreamKClusters& clusters) {
  const bool split_whole = stream_k_split_whole(plan);
  const bool below_wave = plan.workers == 0 && plan.tiles < resident;
  if (row_tiles < 2 || plan.tiles <= 0 || (!split_whole && !below_wave)) return plan;
  const long long slices = static_cast<long long>(plan.tiles) * plan.slices / kStreamKMinSlices;
  const int most = split_whole ? plan.workers : static_cast<int>(slices < resident ? slices : resident);
  const int blocks = clusters.blocks > 0 ? clusters.blocks : cluster_blocks_by_rule(row_tiles, below_wave, most, clusters);
  if (blocks < 1 || blocks > kStreamKMaxClusterBlocks || row_tiles % blocks != 0) return plan;
  const int workers = stream_k_cluster_workers(most, row_tiles, blocks, clusters);
  if (workers <= 0 || (below_wave && 3LL * workers < 4LL * plan.tiles)) return plan;
  plan.whole_tiles = 0;
  plan.workers = workers;
  plan.cluster = blocks;
  plan.row_runs = workers / row_tiles;
  return plan;
}

// The plan of a GEMM on the tiles that take the rows as N (templates/gemm/gemm_tma.cuh), of
// `row_tiles` row tiles: every tile cut into the same runs of K (plan_stream_k with a multiple of
// the tiles as workers), so that the blocks that run at once read the same K slices of A and B;
// and where its row tiles are 2 to kStreamKMaxCluster and its tiles at most a wave, in clusters of
// its row tiles (or of clusters.blocks of them where that is set and divides them; none for 1),
// whose blocks take the same run of one column in consecutive row tiles and so share its B
// slices (B, the larger operand, read once for the cluster's row tiles): a grid of more than half
// a wave, which plan_stream_k leaves whole, then runs a tile a worker. Workers are cut to whole
// tiles' runs of the clusters that run at once; where not even one run a tile fits, no clusters.
// A product of no K slices (B without rows of data) stays whole: its tiles write the addend.
SHARDJIT_HOST_DEVICE inline StreamKPlan plan_rows_as_n(int tiles, int slices, int resident, int row_tiles,
                                                       bool partial_waves, const StreamKClusters& clusters) {
  StreamKPlan plan = plan_stream_k(tiles, slices, resident, tiles, partial_waves);
  const int blocks = clusters.blocks > 0 ? clusters.blocks : row_tiles;
  if (slices <= 0 || blocks < 2 || blocks > kStreamKMaxCluster || row_tiles % blocks != 0 || tiles <= 0 ||
      tiles > resident || clusters.resident[blocks] <= 0 || (plan.workers > 0 && plan.whole_tiles > 0)) {
    return plan;
  }
  const int fit = clusters.resident[blocks] * blocks;
  // A tile's runs: one where the split takes fewer workers than tiles (a few slices a tile).
  int runs = plan.workers >= tiles ? plan.workers / tiles : 1;
  while (runs > 1 && tiles * runs > fit) --runs;
  if (tiles * runs > fit) return plan;
  plan.whole_tiles = 0;
  plan.workers = tiles * runs;
  plan.cluster = blocks;
  plan.row_runs = plan.workers / row_tiles;
  return plan;
}

// The run of block `block`: its index, or in clusters the run of its rank's row tile at the
// cluster's place among the runs of its row tiles. Cluster g of `cluster` blocks takes row tiles
// (g / row_runs) * cluster, ... at run g % row_runs of each.
SHARDJIT_HOST_DEVICE inline int stream_k_block_worker(const StreamKPlan& plan, int block) {
  if (plan.cluster <= 1) return block;
  const int cluster = block / plan.cluster;
  const int row_tile = cluster / plan.row_runs * plan.cluster + block % plan.cluster;
  return row_tile * plan.row_runs + cluster % plan.row_runs;
}

// Blocks to launch: unsplit, one block a tile, or for `persistent` kernels at most `resident`
// blocks walking the tiles; split whole, the workers; with whole tiles before the split ones,
// `resident` blocks, each taking its full waves' tiles and then its run.
SHARDJIT_HOST_DEVICE inline int stream_k_grid(const StreamKPlan& plan, int resident, bool persistent) {
  if (plan.workers > 0) return plan.whole_tiles > 0 ? resident : plan.workers;
  return persistent && resident < plan.tiles ? resident : plan.tiles;
}

// The slices of the split part, one sequence.
SHARDJIT_HOST_DEVICE inline long long stream_k_split_slices(const StreamKPlan& plan) {
  return static_cast<long long>(plan.tiles - plan.whole_tiles) * plan.slices;
}

// Where worker j's run starts in the split part's slice sequence (j = workers: its end).
SHARDJIT_HOST_DEVICE inline long long stream_k_run_begin(const StreamKPlan& plan, int worker) {
  return stream_k_split_slices(plan) * worker / plan.workers;
}

// The worker whose run holds position `at` of the sequence.
SHARDJIT_HOST_DEVICE inline int stream_k_worker_at(const StreamKPlan& plan, long long at) {
  return static_cast<int>(((at + 1) * plan.workers - 1) / stream_k_split_slices(plan));
}

// The pieces of a split tile: the workers first..last, in K order.
struct TilePieces {
  int first;
  int last;
};

// Where split tile `tile`'s slices start in the sequence.
SHARDJIT_HOST_DEVICE inline long long stream_k_tile_begin(const StreamKPlan& plan, int tile) {
  return static_cast<long long>(tile - plan.whole_tiles) * plan.slices;
}

SHARDJIT_HOST_DEVICE inline TilePieces stream_k_pieces(const StreamKPlan& plan, int tile) {
  const long long begin = stream_k_tile_begin(plan, tile);
  return {stream_k_worker_at(plan, begin), stream_k_worker_at(plan, begin + plan.slices - 1)};
}

// The partial-sum slot of worker j's piece of split tile `tile`: 2 j for the first piece of its
// run, 2 j + 1 for the last (a run's pieces in between are whole tiles, which need none).
SHARDJIT_HOST_DEVICE inline int stream_k_slot(const StreamKPlan& plan, int tile, int worker) {
  return 2 * worker + (stream_k_tile_begin(plan, tile) <= stream_k_run_begin(plan, worker) ? 0 : 1);
}

// The arrival counter of split tile `tile`.
SHARDJIT_HOST_DEVICE inline int stream_k_counter(const StreamKPlan& plan, int tile) {
  return tile - plan.whole_tiles;
}

// Calls run(segment) for each segment of block `block` of `grid`, in order (the kernels pass
// their block index and grid; the host tests walk every block): first the whole tiles block,
// block + grid, ... below whole_tiles, then, for a worker, its run of the split part's sequence
// cut at tile boundaries. The walk is two ints, `at` and `end`, kept across the kernels' main
// loops at full registers while the plan stays in the parameter space: among the whole tiles,
// `at` is the next tile and `end` is -1; in the run, [at, end) is what is left of it.
//
// run has one call site: each call inlines a kernel's whole tile body (its main loop, epilogue and
// fixup), which a call site for each part of the plan would compile over again
// (docs/perf-notes-jit.md, "Changes and predictions"). A body compiled for any segment keeps in
// its loop what a loop of whole tiles would hoist; the GEMM epilogue branches once a tile around
// the addend's loads (gemm/gemm_epilogue.cuh), so that even its one-slice tiles pay little for it.
template <class Run>
SHARDJIT_HOST_DEVICE_INLINE void for_each_segment(const StreamKPlan& plan, int block, int grid, Run&& run) {
  int at = block;
  int end = -1;
  while (true) {
    if (end < 0 && at >= plan.whole_tiles) {  // the whole tiles are done: the block's run, if any
      if (block >= plan.workers) return;
      at = static_cast<int>(stream_k_run_begin(plan, block));
      end = static_cast<int>(stream_k_run_begin(plan, block + 1));
    }
    if (end >= 0 && at >= end) return;
    TileSegment segment{at, 0, plan.slices, -1};
    if (end < 0) {
      at += grid;
    } else {
      const int split_tile = at / plan.slices;
      const int first = split_tile * plan.slices;
      const int stop = min_int(end, first + plan.slices);
      segment = TileSegment{plan.whole_tiles + split_tile, at - first, stop - first, block};
      at = stop;
    }
    run(segment);
  }
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// This block's segments.
template <class Run>
__device__ __forceinline__ void for_each_segment(const StreamKPlan& plan, Run&& run) {
  for_each_segment(plan, stream_k_block_worker(plan, static_cast<int>(blockIdx.x)), static_cast<int>(gridDim.x), run);
}
#endif

// Whether the segment is a whole tile (no partial sums to merge).
SHARDJIT_HOST_DEVICE inline bool stream_k_whole(const StreamKPlan& plan, const TileSegment& segment) {
  return segment.begin == 0 && segment.end == plan.slices;
}

}  // namespace kernels
}  // namespace shardjit
