// Which tiles, and which K slices of them, each block of a Hopper kernel computes (the Hopper
// GEMM and dZ kernels), so that a grid of few tiles still keeps every multiprocessor busy.
//
// At llama3-8b-decode (256 rows) grad_hidden is 32 tiles of 2004 K slices: one block a tile
// would leave 100 of 132 multiprocessors idle for the whole kernel. When a kernel's tiles cannot
// fill half the GPU, their slices are taken as one sequence, tile after tile, and cut into
// `workers` equal runs, one a block ("stream-K"):
//
//   tiles [0, whole_tiles)        whole, block b takes b, b + grid, ...;
//   tiles [whole_tiles, tiles)    their slices in one sequence, cut into `workers` runs; worker j
//                                 is block grid - workers + j.
//
// A run covers parts of one to a few tiles. A tile cut between runs (its pieces) is finished by
// the last of its pieces to arrive (templates/common/stream_k_fixup.cuh): every piece stores its
// fp32 partial sums, and the last one adds them all in piece order, so that the sums are the same
// whichever piece arrives last, and no block ever waits for another.
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
  int whole_tiles;          // tiles [0, whole_tiles) are computed whole
  int workers;              // blocks that split the rest; 0 when nothing is split
  float* partials;          // 2 x workers tiles of fp32 partial sums (StreamKFixup)
  unsigned int* arrivals;   // a counter a split tile, zero between launches
};

// Part of one tile a block computes: K slices [begin, end) of tile `tile`. worker < 0 for a
// whole tile.
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

// The plan of such a launch; the caller sets the workspace pointers. Unsplit, every tile is
// whole.
SHARDJIT_HOST_DEVICE inline StreamKPlan plan_stream_k(int tiles, int slices, int resident) {
  StreamKPlan plan{tiles, slices, tiles, 0, nullptr, nullptr};
  if (!stream_k_splits(tiles, slices, resident)) return plan;
  plan.whole_tiles = 0;
  const long long workers = static_cast<long long>(tiles) * slices / kStreamKMinSlices;
  plan.workers = static_cast<int>(workers < resident ? workers : resident);
  return plan;
}

// Blocks to launch: `persistent` kernels walk their whole tiles with a grid of at most `resident`
// blocks; the others launch one block a whole tile, then the workers.
SHARDJIT_HOST_DEVICE inline int stream_k_grid(const StreamKPlan& plan, int resident, bool persistent) {
  if (persistent) {
    const int whole = plan.whole_tiles < resident ? plan.whole_tiles : resident;
    return whole > plan.workers ? whole : plan.workers;
  }
  return plan.whole_tiles + plan.workers;
}

SHARDJIT_HOST_DEVICE inline long long stream_k_split_slices(const StreamKPlan& plan) {
  return static_cast<long long>(plan.tiles - plan.whole_tiles) * plan.slices;
}

// Where worker j's run starts in the split tiles' slice sequence (j = workers: its end).
SHARDJIT_HOST_DEVICE inline long long stream_k_run_begin(const StreamKPlan& plan, int worker) {
  return stream_k_split_slices(plan) * worker / plan.workers;
}

// The worker whose run holds position `at` of the sequence.
SHARDJIT_HOST_DEVICE inline int stream_k_worker_at(const StreamKPlan& plan, long long at) {
  return static_cast<int>(((at + 1) * plan.workers - 1) / stream_k_split_slices(plan));
}

// The pieces of split tile `tile`: the workers first..last, in K order.
struct TilePieces {
  int first;
  int last;
};

SHARDJIT_HOST_DEVICE inline TilePieces stream_k_pieces(const StreamKPlan& plan, int tile) {
  const long long begin = static_cast<long long>(tile - plan.whole_tiles) * plan.slices;
  return {stream_k_worker_at(plan, begin), stream_k_worker_at(plan, begin + plan.slices - 1)};
}

// The partial-sum slot of worker j's piece of split tile `tile`: 2 j for the first piece of its
// run, 2 j + 1 for the last (a run's pieces in between are whole tiles, which need none).
SHARDJIT_HOST_DEVICE inline int stream_k_slot(const StreamKPlan& plan, int tile, int worker) {
  const long long begin = static_cast<long long>(tile - plan.whole_tiles) * plan.slices;
  return 2 * worker + (begin <= stream_k_run_begin(plan, worker) ? 0 : 1);
}

// A block's segments, in the order it computes them: whole tiles, then its run's pieces. The walk
// keeps four ints, and is handed the plan and the grid again at each step: kernels keep it live
// across their main loops, at full registers, while the plan stays in the parameter space.
struct StreamKWalk {
  int next_whole;  // the next whole tile
  int worker;      // < 0: the block is no worker
  int at;          // position in the split sequence
  int end;         // end of the block's run

  SHARDJIT_HOST_DEVICE StreamKWalk(const StreamKPlan& plan, int block, int grid)
      : next_whole(block), worker(block - (grid - plan.workers)), at(0), end(0) {
    if (plan.workers > 0 && worker >= 0) {
      at = static_cast<int>(stream_k_run_begin(plan, worker));
      end = static_cast<int>(stream_k_run_begin(plan, worker + 1));
    } else {
      worker = -1;
    }
  }

  // The next segment into `segment`; false when the block is done.
  SHARDJIT_HOST_DEVICE bool next(const StreamKPlan& plan, int grid, TileSegment& segment) {
    if (next_whole < plan.whole_tiles) {
      segment = TileSegment{next_whole, 0, plan.slices, -1};
      next_whole += grid;
      return true;
    }
    if (at >= end) return false;
    const int split_tile = at / plan.slices;
    const int first = split_tile * plan.slices;
    const int stop = end < first + plan.slices ? end : first + plan.slices;
    segment = TileSegment{plan.whole_tiles + split_tile, at - first, stop - first, worker};
    at = stop;
    return true;
  }
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Calls run(segment) for each of the block's segments, in order. Unsplit, the block's whole
// tiles go through a loop of their own, in which every segment has the same constant extent, so
// that the compiler knows where a ring of stages stands at each tile's start and unrolls the
// main loop by its stages (through the walk it issues about a third more instructions a slice).
template <class Run>
__device__ __forceinline__ void for_each_segment(const StreamKPlan& plan, Run&& run) {
  const int grid = static_cast<int>(gridDim.x);
  if (plan.workers == 0 && plan.tiles <= grid) {  // one tile a block
    if (static_cast<int>(blockIdx.x) < plan.tiles) run(TileSegment{static_cast<int>(blockIdx.x), 0, plan.slices, -1});
    return;
  }
  if (plan.workers == 0) {
    for (int tile = static_cast<int>(blockIdx.x); tile < plan.tiles; tile += grid) {
      run(TileSegment{tile, 0, plan.slices, -1});
    }
    return;
  }
  StreamKWalk walk(plan, static_cast<int>(blockIdx.x), grid);
  for (TileSegment segment; walk.next(plan, grid, segment);) run(segment);
}
#endif

// Whether the segment is a whole tile (no partial sums to merge).
SHARDJIT_HOST_DEVICE inline bool stream_k_whole(const StreamKPlan& plan, const TileSegment& segment) {
  return segment.begin == 0 && segment.end == plan.slices;
}

}  // namespace kernels
}  // namespace shardjit
