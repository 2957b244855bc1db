// Which tiles, and which K slices of them, each block of a Hopper kernel computes (the Hopper
// GEMM and dZ kernels), so that a grid of few tiles still keeps every multiprocessor busy.
//
// At llama3-8b-decode (256 rows) grad_hidden is 32 tiles of 2004 K slices: one block a tile
// would leave 100 of 132 multiprocessors idle for the whole kernel. When a kernel's tiles cannot
// fill half the GPU, their slices are taken as one sequence, tile after tile, and cut into
// `workers` equal runs, one a block ("stream-K"); otherwise every tile is computed whole, by one
// block a tile or by persistent blocks taking tiles b, b + grid, ...
//
// A run covers parts of one to a few tiles. A tile cut between runs (its pieces) is finished by
// the last of its pieces to arrive (templates/common/stream_k_fixup.cuh): every piece stores its
// fp32 partial sums, and the last one adds them all in piece order, so that the sums are the same
// whichever piece arrives last, and no block ever waits for another.
//
// The runs of a split plan advance through K at the same pace, so tiles whose slices are a whole
// number of runs apart in the sequence read the same K slice at about the same time, and one
// read from memory serves them all through L2. A split GEMM walks its tiles row after row
// (row_major_tile_index, common/tile_order.cuh), so the row tiles of one output column lie
// tiles_n tiles, workers / tiles_m runs, apart; the plan takes a multiple of tiles_m workers
// (row_tiles) to make that whole. For grad_hidden at a few hundred rows (B = W, the largest
// operand) that is what lets the row tiles share W's reads; they share them only while their
// blocks keep in step, which they do not hold for long (docs/perf-notes.md, "Stream-K", has
// what was measured).
//
// Larger grids are not split, even when their last wave is partial: the runs start at scattered
// K offsets, so the blocks stop sharing their operands' K slices in L2 (grad_weight at
// llama3-8b-16k went from 1.65 to 1.89 ms a chunk), and where the split did shorten a kernel
// (dZ, by 0.04 ms a chunk) the op as a whole did not get faster (docs/perf-notes.md, "Stream-K").
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
  int workers;              // blocks that split the tiles, one run each; 0 when nothing is split
  float* partials;          // 2 x workers tiles of fp32 partial sums (StreamKFixup)
  unsigned int* arrivals;   // a counter a tile, zero between launches
};

// Part of one tile a block computes: K slices [begin, end) of tile `tile`; `worker` is the block's
// run in a split plan, < 0 unsplit.
struct TileSegment {
  int tile;
  int begin;
  int end;
  int worker;
};

// Split runs shorter than this many slices cost more in partial sums than they gain.
constexpr int kStreamKMinSlices = 8;

// Whether `tiles` tiles of `slices` K slices on `resident` blocks (the blocks that run at once)
// are split: when they fill at most half of the blocks and have K to split.
SHARDJIT_HOST_DEVICE inline bool stream_k_splits(int tiles, int slices, int resident) {
  return tiles > 0 && slices > 0 && 2 * tiles <= resident &&
         static_cast<long long>(tiles) * slices >= 2 * kStreamKMinSlices;
}

// The plan of such a launch; the caller sets the workspace pointers. `row_tiles`: the row tiles
// of a kernel that walks a split plan row after row (row_major_tile_index); the workers are a
// multiple of them where there are at least as many.
SHARDJIT_HOST_DEVICE inline StreamKPlan plan_stream_k(int tiles, int slices, int resident, int row_tiles = 1) {
  StreamKPlan plan{tiles, slices, 0, nullptr, nullptr};
  if (!stream_k_splits(tiles, slices, resident)) return plan;
  const long long most = static_cast<long long>(tiles) * slices / kStreamKMinSlices;
  int workers = static_cast<int>(most < resident ? most : resident);
  if (row_tiles > 1 && workers >= row_tiles) workers -= workers % row_tiles;
  plan.workers = workers;
  return plan;
}

// Blocks to launch: a split plan's workers; unsplit, one block a tile, or for `persistent`
// kernels at most `resident` blocks walking the tiles.
SHARDJIT_HOST_DEVICE inline int stream_k_grid(const StreamKPlan& plan, int resident, bool persistent) {
  if (plan.workers > 0) return plan.workers;
  return persistent && resident < plan.tiles ? resident : plan.tiles;
}

// Where worker j's run starts in the slice sequence of all tiles (j = workers: its end).
SHARDJIT_HOST_DEVICE inline long long stream_k_run_begin(const StreamKPlan& plan, int worker) {
  return static_cast<long long>(plan.tiles) * plan.slices * worker / plan.workers;
}

// The worker whose run holds position `at` of the sequence.
SHARDJIT_HOST_DEVICE inline int stream_k_worker_at(const StreamKPlan& plan, long long at) {
  return static_cast<int>(((at + 1) * plan.workers - 1) / (static_cast<long long>(plan.tiles) * plan.slices));
}

// The pieces of a tile of a split plan: the workers first..last, in K order.
struct TilePieces {
  int first;
  int last;
};

SHARDJIT_HOST_DEVICE inline TilePieces stream_k_pieces(const StreamKPlan& plan, int tile) {
  const long long begin = static_cast<long long>(tile) * plan.slices;
  return {stream_k_worker_at(plan, begin), stream_k_worker_at(plan, begin + plan.slices - 1)};
}

// The partial-sum slot of worker j's piece of tile `tile`: 2 j for the first piece of its run,
// 2 j + 1 for the last (a run's pieces in between are whole tiles, which need none).
SHARDJIT_HOST_DEVICE inline int stream_k_slot(const StreamKPlan& plan, int tile, int worker) {
  const long long begin = static_cast<long long>(tile) * plan.slices;
  return 2 * worker + (begin <= stream_k_run_begin(plan, worker) ? 0 : 1);
}

// Calls run(segment) for each segment of block `block` of `grid`, in order (the kernels pass
// their block index and grid; the host tests walk every block): unsplit, tiles block,
// block + grid, ... whole; split, the block's run of the slice sequence cut at tile boundaries.
// Both walk [at, end) in two ints, kept across the kernels' main loops at full registers while
// the plan stays in the parameter space.
//
// run has one call site: each call inlines a kernel's whole tile body (its main loop, epilogue and
// fixup), which a call site for each form of the plan would compile over again
// (docs/perf-notes-jit.md, "Changes and predictions"). A body compiled for any segment keeps in
// its loop what a loop of whole tiles would hoist; the GEMM epilogue branches once a tile around
// the addend's loads (gemm/gemm_epilogue.cuh), so that even its one-slice tiles pay little for it.
template <class Run>
SHARDJIT_HOST_DEVICE_INLINE void for_each_segment(const StreamKPlan& plan, int block, int grid, Run&& run) {
  const bool split = plan.workers > 0;
  if (split && block >= plan.workers) return;
  int at = split ? static_cast<int>(stream_k_run_begin(plan, block)) : block;
  const int end = split ? static_cast<int>(stream_k_run_begin(plan, block + 1)) : plan.tiles;
  while (at < end) {
    TileSegment segment{at, 0, plan.slices, -1};
    if (split) {
      const int tile = at / plan.slices;
      const int first = tile * plan.slices;
      const int stop = min_int(end, first + plan.slices);
      segment = TileSegment{tile, at - first, stop - first, block};
      at = stop;
    } else {
      at += grid;
    }
    run(segment);
  }
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// This block's segments.
template <class Run>
__device__ __forceinline__ void for_each_segment(const StreamKPlan& plan, Run&& run) {
  for_each_segment(plan, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), run);
}
#endif

// Whether the segment is a whole tile (no partial sums to merge).
SHARDJIT_HOST_DEVICE inline bool stream_k_whole(const StreamKPlan& plan, const TileSegment& segment) {
  return segment.begin == 0 && segment.end == plan.slices;
}

}  // namespace kernels
}  // namespace shardjit
