// The split of a kernel's tiles among its blocks (templates/common/stream_k.cuh), walked on the
// host as the kernels walk it: every K slice of every tile is computed by exactly one block, whole
// tiles before split ones, the pieces of a split tile are the workers the plan names, their
// partial-sum slots and arrival counters are distinct and within the workspace, and the last wave
// is as full as the split can make it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "common/stream_k.cuh"
#include "common/tile_order.cuh"

namespace shardjit {
namespace {

struct Walked {
  std::vector<int> covered;                       // per (tile, slice): how many blocks computed it
  std::map<int, std::set<int>> pieces;            // split tile -> the workers of its pieces
  std::set<int> slots;                            // partial-sum slots in use
  std::set<int> counters;                         // arrival counters in use
  std::vector<long long> slices_per_block;        // K slices each block computes
};

Walked walk_all(const kernels::StreamKPlan& plan, int grid) {
  Walked w;
  w.covered.assign(static_cast<std::size_t>(plan.tiles) * plan.slices, 0);
  w.slices_per_block.assign(static_cast<std::size_t>(grid), 0);
  for (int block = 0; block < grid; ++block) {
    bool in_run = false;
    kernels::for_each_segment(plan, block, grid, [&](const kernels::TileSegment& s) {
      EXPECT_TRUE(s.tile >= 0 && s.tile < plan.tiles) << "block " << block;
      EXPECT_TRUE(0 <= s.begin && s.begin < s.end && s.end <= plan.slices) << "block " << block;
      for (int k = s.begin; k < s.end; ++k) ++w.covered[static_cast<std::size_t>(s.tile) * plan.slices + k];
      w.slices_per_block[static_cast<std::size_t>(block)] += s.end - s.begin;
      EXPECT_EQ(s.worker >= 0, s.tile >= plan.whole_tiles)
          << "the split tiles' segments, and only those, have a worker";
      if (s.worker >= 0) {
        EXPECT_EQ(s.worker, block) << "worker j is block j";
        in_run = true;
      } else {
        EXPECT_FALSE(in_run) << "block " << block << ": a whole tile after its run";
        EXPECT_TRUE(kernels::stream_k_whole(plan, s));
      }
      if (s.worker >= 0 && !kernels::stream_k_whole(plan, s)) {
        w.pieces[s.tile].insert(s.worker);
        const int slot = kernels::stream_k_slot(plan, s.tile, s.worker);
        EXPECT_TRUE(w.slots.insert(slot).second) << "slot " << slot << " used twice";
        EXPECT_TRUE(slot >= 0 && slot < 2 * plan.workers);
        const int counter = kernels::stream_k_counter(plan, s.tile);
        EXPECT_TRUE(counter >= 0 && counter < 2 * plan.workers) << "counter " << counter;
        w.counters.insert(counter);
      }
    });
  }
  return w;
}

// A plan walked on the host as the kernels walk it: every tile-slice once, the pieces and slots
// consistent.
void check_walk(const kernels::StreamKPlan& plan, int grid) {
  SCOPED_TRACE(testing::Message() << plan.tiles << " tiles of " << plan.slices << " slices, " << plan.workers
                                  << " workers, grid " << grid);
  const Walked w = walk_all(plan, grid);
  for (std::size_t i = 0; i < w.covered.size(); ++i) ASSERT_EQ(w.covered[i], 1) << "tile-slice " << i;
  for (const auto& [tile, workers] : w.pieces) {
    const kernels::TilePieces p = kernels::stream_k_pieces(plan, tile);
    ASSERT_GT(p.last, p.first) << "a split tile has two pieces or more";
    EXPECT_EQ(static_cast<int>(workers.size()), p.last - p.first + 1) << "tile " << tile;
    EXPECT_EQ(*workers.begin(), p.first);
    EXPECT_EQ(*workers.rbegin(), p.last);
  }
  EXPECT_EQ(w.counters.size(), w.pieces.size()) << "a counter a split tile";
}

TEST(StreamK, EverySliceOfEveryTileOnce) {
  // tiles, slices, resident, persistent: grad_hidden at llama3-8b-decode (32 tiles of 2004
  // slices on 132 multiprocessors) and at 1100 and 2100 rows (144 and 272 tiles: a partial last
  // wave), the backward tests' small grids, tiny K, whole grids, a last wave too short to split.
  for (auto [tiles, slices, resident, persistent] :
       {std::tuple{32, 2004, 132, false}, {144, 2004, 132, false}, {272, 1002, 132, false}, {36, 71, 132, false},
        {54, 16, 132, true}, {6, 64, 132, true}, {1, 1, 132, false}, {3, 5, 132, false}, {66, 35, 132, false},
        {80, 11, 132, true}, {144, 16, 132, true}, {192, 11, 132, false}, {133, 1, 132, true}, {4096, 64, 132, true},
        {1024, 256, 132, false}, {20, 100, 40, true}, {45, 3, 40, false}, {16032, 4, 132, true}}) {
    for (const bool partial_waves : {true, false}) {
      const kernels::StreamKPlan plan = kernels::plan_stream_k(tiles, slices, resident, 1, partial_waves);
      const int grid = kernels::stream_k_grid(plan, resident, persistent);
      ASSERT_GE(grid, 1);
      if (persistent || plan.workers > 0) {
        EXPECT_LE(grid, resident);
      }
      EXPECT_LE(plan.workers, resident);
      if (plan.workers > 0) {
        EXPECT_LT(plan.tiles - plan.whole_tiles, resident) << "the workspace has a counter a split tile";
        EXPECT_EQ(plan.whole_tiles % resident, 0) << "whole tiles fill whole waves";
        if (plan.whole_tiles > 0) {
          EXPECT_TRUE(partial_waves);
          EXPECT_EQ(grid, resident);
        }
      } else {
        EXPECT_EQ(plan.whole_tiles, plan.tiles) << "unsplit, every tile is whole";
      }
      check_walk(plan, grid);
    }
  }
}

// Behind full waves, with two row tiles or more, every split tile takes the same number of runs,
// each within the tile and at the same K offsets in every tile, so that a column's row tiles start
// each K slice together: the kept chunk's 333 x 8192 x 16032 (3 x 63 tiles of 128 slices, 57 in
// the last wave) on 114 workers, not 132 whose runs would start 55.3 slices apart. A launch plans
// so whether or not its kernel walks plans split whole row after row (the GEMM's does).
TEST(StreamK, TheLastWaveSplitsEveryTileAlike) {
  for (const auto& [tiles, slices, row_tiles, workers] :
       {std::tuple{189, 128, 3, 114}, {192, 131, 3, 120}, {144, 2004, 9, 132}, {160, 80, 8, 112},
        {297, 64, 3, 132}, {272, 1002, 17, 128}}) {
    const kernels::StreamKPlan plan = kernels::plan_launch_stream_k(tiles, slices, 132, row_tiles, false, true);
    const kernels::StreamKPlan gemm_plan = kernels::plan_launch_stream_k(tiles, slices, 132, row_tiles, true, true);
    EXPECT_EQ(gemm_plan.workers, plan.workers) << tiles << " tiles: the row-major walk splits whole only";
    EXPECT_EQ(gemm_plan.whole_tiles, plan.whole_tiles) << tiles << " tiles";
    const int split = tiles - plan.whole_tiles;
    ASSERT_EQ(plan.workers, workers) << tiles << " tiles";
    ASSERT_LE(plan.workers, 132);
    check_walk(plan, 132);
    ASSERT_EQ(plan.workers % split, 0) << tiles << " tiles";
    const int runs = plan.workers / split;
    for (int worker = 0; worker < plan.workers; ++worker) {
      const long long begin = kernels::stream_k_run_begin(plan, worker);
      const long long end = kernels::stream_k_run_begin(plan, worker + 1);
      EXPECT_EQ(begin / slices, (end - 1) / slices) << "worker " << worker << " stays in its tile";
      EXPECT_EQ(begin % slices, static_cast<long long>(slices) * (worker % runs) / runs) << "worker " << worker;
    }
  }
  // One run a tile would be the tiles whole: such a plan keeps its runs across tiles. So does a
  // grid of one row tile, whose split tiles share only the small operand.
  EXPECT_EQ(kernels::split_last_wave_alike(kernels::plan_stream_k(144, 11, 132), 9).workers, 12 * 11 / 8);
  EXPECT_EQ(kernels::split_last_wave_alike(kernels::plan_stream_k(189, 128, 132), 1).workers, 132);
  // Plans split whole are left as they are.
  const kernels::StreamKPlan whole = kernels::plan_stream_k(60, 128, 132);
  EXPECT_EQ(kernels::split_last_wave_alike(whole, 3).workers, whole.workers);
  // A launch's plan split whole: the GEMM's workers a multiple of its row tiles (126 of 132 over
  // 7), dZ's all the blocks.
  EXPECT_EQ(kernels::plan_launch_stream_k(60, 128, 132, 7, true, true).workers, 126);
  EXPECT_EQ(kernels::plan_launch_stream_k(60, 128, 132, 7, false, true).workers, whole.workers);
}

// The rule: below one wave, at most half the blocks' tiles, all split; above it, where the
// unsplit launch's last wave would leave a quarter of its block-time idle, that is (132 blocks)
// a full wave and at most 66 more, or two and at most 33 more; never three waves or more.
TEST(StreamK, OnlyGridsWhoseLastWaveLeavesAQuarterIdleAreSplit) {
  EXPECT_EQ(kernels::plan_stream_k(4096, 64, 132).workers, 0) << "31 waves: the last one's gap is not worth it";
  EXPECT_EQ(kernels::plan_stream_k(1024, 256, 132).workers, 0) << "7.76 waves";
  EXPECT_EQ(kernels::plan_stream_k(397, 2004, 132).workers, 0) << "three full waves and one tile";
  EXPECT_EQ(kernels::plan_stream_k(67, 128, 132).workers, 0) << "more than half the GPU, less than a wave";
  EXPECT_EQ(kernels::plan_stream_k(99, 128, 132).workers, 0);
  EXPECT_EQ(kernels::plan_stream_k(132, 128, 132).workers, 0) << "one full wave";
  EXPECT_EQ(kernels::plan_stream_k(199, 128, 132).workers, 0) << "the last wave more than half full";
  EXPECT_EQ(kernels::plan_stream_k(298, 128, 132).workers, 0);
  for (const int tiles : {33, 66}) {
    const kernels::StreamKPlan plan = kernels::plan_stream_k(tiles, 128, 132);
    EXPECT_EQ(plan.workers, 132) << tiles << " tiles";
    EXPECT_EQ(plan.whole_tiles, 0) << tiles << " tiles: split whole";
    EXPECT_EQ(kernels::plan_stream_k(tiles, 128, 132, 1, false).workers, 132) << "the same below one wave";
  }
  for (const auto& [tiles, whole] : {std::pair{133, 132}, {144, 132}, {198, 132}, {265, 264}, {297, 264}}) {
    const kernels::StreamKPlan plan = kernels::plan_stream_k(tiles, 2004, 132);
    EXPECT_EQ(plan.whole_tiles, whole) << tiles << " tiles";
    EXPECT_EQ(plan.workers, 132) << tiles << " tiles";
    EXPECT_EQ(kernels::stream_k_grid(plan, 132, false), 132);
    EXPECT_EQ(kernels::plan_stream_k(tiles, 2004, 132, 1, false).workers, 0);
  }
  EXPECT_EQ(kernels::plan_stream_k(144, 11, 132).workers, 12 * 11 / 8) << "runs of at least 8 slices";
  EXPECT_EQ(kernels::plan_stream_k(133, 1, 132).workers, 0) << "one tile of one slice left: nothing to split";
  EXPECT_EQ(kernels::plan_stream_k(100, 0, 132).workers, 0) << "no K: nothing to split";
  EXPECT_EQ(kernels::plan_stream_k(10, 64, 0).workers, 0) << "no workspace: nothing is split";
  EXPECT_EQ(kernels::plan_stream_k(1, 1, 132).workers, 0) << "too little K to be worth a partial sum";
  const kernels::StreamKPlan decode = kernels::plan_stream_k(32, 2004, 132);
  EXPECT_EQ(decode.workers, 132);
  EXPECT_EQ(kernels::plan_stream_k(6, 8, 132).workers, 6) << "runs of at least 8 slices";
  EXPECT_EQ(kernels::stream_k_grid(kernels::plan_stream_k(4096, 64, 132), 132, true), 132);
  EXPECT_EQ(kernels::stream_k_grid(kernels::plan_stream_k(4096, 64, 132), 132, false), 4096);
  EXPECT_EQ(kernels::stream_k_grid(kernels::plan_stream_k(100, 64, 132), 132, true), 100);
}

// A split GEMM walks its tiles row after row (row_major_tile_index), with a multiple of its row
// tiles as workers: the row tiles of a column then reach each K slice at the same point of their
// runs (to a slice), workers / row tiles apart, so one read of B's slice serves them all. At
// 333 rows and H = 4096: 3 x 16 tiles; at 600 rows of hidden 3328: 5 x 13 on 130 of 132 blocks.
TEST(StreamK, RowTilesOfAColumnReachEachSliceTogether) {
  for (auto [tiles_m, tiles_n, slices] : {std::tuple{3, 16, 2004}, {5, 13, 2004}, {2, 16, 1002}, {4, 8, 71}}) {
    const kernels::StreamKPlan plan = kernels::plan_stream_k(tiles_m * tiles_n, slices, 132, tiles_m);
    ASSERT_GT(plan.workers, 0);
    EXPECT_EQ(plan.workers % tiles_m, 0) << tiles_m << " row tiles";
    EXPECT_GT(plan.workers, 132 - tiles_m);
    check_walk(plan, kernels::stream_k_grid(plan, 132, false));
    const int apart = plan.workers / tiles_m;
    for (int n = 0; n < tiles_n; ++n) {
      for (int k = 0; k < slices; k += 7) {
        const kernels::TileIndex first = kernels::row_major_tile_index(n, tiles_n);
        ASSERT_EQ(first.m, 0);
        ASSERT_EQ(first.n, n);
        const long long at0 = static_cast<long long>(n) * slices + k;
        const int w0 = kernels::stream_k_worker_at(plan, at0);
        for (int m = 1; m < tiles_m; ++m) {
          const int tile = m * tiles_n + n;
          ASSERT_EQ(kernels::row_major_tile_index(tile, tiles_n).m, m);
          const long long at = static_cast<long long>(tile) * slices + k;
          const int w = kernels::stream_k_worker_at(plan, at);
          const long long lag = (at - kernels::stream_k_run_begin(plan, w)) - (at0 - kernels::stream_k_run_begin(plan, w0));
          EXPECT_LE(std::abs(w - (w0 + m * apart)), 1) << "tile " << tile << " slice " << k;
          if (w == w0 + m * apart) {
            EXPECT_LE(std::llabs(lag), 1) << "tile " << tile << " slice " << k;
          }
        }
      }
    }
  }
  EXPECT_EQ(kernels::plan_stream_k(48, 2004, 132, 1).workers, 132);
  EXPECT_EQ(kernels::plan_stream_k(65, 2004, 132, 5).workers, 130);
  EXPECT_EQ(kernels::plan_stream_k(65, 2004, 132).workers, 132) << "no row tiles given: every block";
}

// What an H100 ran at once of the GEMM's clusters (2026-12-06), by blocks a cluster (one: its 132
// blocks); `blocks` as StreamKWorkspace sets it (0: the rule's).
kernels::StreamKClusters h100_clusters(int blocks = 0) {
  return kernels::StreamKClusters{{0, 132, 66, 39, 30, 22, 17, 15, 15}, blocks};
}

// Clusters of `resident` at once for every size, for walks that want the workers uncut.
kernels::StreamKClusters every_size(int resident, int blocks = 0) {
  kernels::StreamKClusters clusters{{}, blocks};
  for (int b = 2; b <= kernels::kStreamKMaxClusterBlocks; ++b) clusters.resident[b] = resident;
  return clusters;
}

// The blocks of a clustered plan (cluster_stream_k), walked: every run once, and the blocks of a
// cluster walk the same K slices of one column, each in its own row tile (consecutive ones),
// segment for segment: their rings fill the same stages with the same B slices (gemm/gemm_tma.cuh).
void check_clusters(const kernels::StreamKPlan& plan, int tiles_m, int tiles_n) {
  ASSERT_GE(plan.cluster, 2);
  ASSERT_EQ(tiles_m % plan.cluster, 0);
  ASSERT_EQ(plan.workers % tiles_m, 0) << "a column's row tiles whole runs apart";
  ASSERT_EQ(plan.row_runs, plan.workers / tiles_m);
  const int grid = kernels::stream_k_grid(plan, 132, false);
  ASSERT_EQ(grid, plan.workers);
  ASSERT_EQ(grid % plan.cluster, 0) << "whole clusters";
  std::vector<int> workers;
  for (int block = 0; block < grid; ++block) workers.push_back(kernels::stream_k_block_worker(plan, block));
  std::vector<int> sorted = workers;
  std::sort(sorted.begin(), sorted.end());
  for (int j = 0; j < grid; ++j) ASSERT_EQ(sorted[static_cast<std::size_t>(j)], j) << "every run, once";
  check_walk(plan, grid);
  auto segments_of = [&](int block) {
    std::vector<kernels::TileSegment> segments;
    kernels::for_each_segment(plan, workers[static_cast<std::size_t>(block)], grid,
                              [&](const kernels::TileSegment& s) { segments.push_back(s); });
    return segments;
  };
  for (int first = 0; first < grid; first += plan.cluster) {
    const std::vector<kernels::TileSegment> lead = segments_of(first);
    ASSERT_FALSE(lead.empty());
    for (int rank = 1; rank < plan.cluster; ++rank) {
      const std::vector<kernels::TileSegment> peer = segments_of(first + rank);
      ASSERT_EQ(peer.size(), lead.size()) << "block " << first + rank;
      for (std::size_t i = 0; i < lead.size(); ++i) {
        const kernels::TileIndex a = kernels::row_major_tile_index(lead[i].tile, tiles_n);
        const kernels::TileIndex b = kernels::row_major_tile_index(peer[i].tile, tiles_n);
        EXPECT_EQ(b.m, a.m + rank) << "block " << first + rank << " segment " << i;
        EXPECT_EQ(b.n, a.n);
        EXPECT_EQ(peer[i].begin, lead[i].begin);
        EXPECT_EQ(peer[i].end, lead[i].end);
      }
    }
  }
}

// In clusters of all its row tiles, as the rule takes them for plans split whole. Where the device
// runs fewer clusters than the workers need, the workers are cut to those it runs, still a
// multiple of the row tiles.
TEST(StreamK, ClusterBlocksWalkTheSameSlicesOfOneColumn) {
  for (auto [tiles_m, tiles_n, slices, resident] :
       {std::tuple{3, 16, 2004, 44}, {3, 16, 2004, 42}, {2, 16, 1002, 66}, {4, 8, 71, 30}, {5, 13, 2004, 26},
        {3, 1, 313, 44}}) {
    SCOPED_TRACE(testing::Message() << tiles_m << " x " << tiles_n << " tiles of " << slices << " slices, "
                                    << resident << " clusters at once");
    const kernels::StreamKPlan split = kernels::plan_stream_k(tiles_m * tiles_n, slices, 132, tiles_m);
    const kernels::StreamKPlan plan = kernels::cluster_stream_k(split, tiles_m, 132, every_size(resident));
    ASSERT_EQ(plan.cluster, tiles_m);
    EXPECT_EQ(plan.workers, std::min(split.workers, resident * tiles_m));
    check_clusters(plan, tiles_m, tiles_n);
  }
}

// Clusters of a divisor of the row tiles (SHARDJIT_SPLIT_CLUSTERS, or the rule below a wave): a
// cluster takes consecutive row tiles at one run, and the clusters of the other row tiles of a
// column take the same runs.
TEST(StreamK, ClustersOfADivisorOfTheRowTilesWalkTheSameSlices) {
  for (auto [tiles_m, tiles_n, slices, blocks, resident] :
       {std::tuple{8, 8, 2374, 2, 66}, {8, 8, 2374, 4, 30}, {6, 8, 2374, 3, 39}, {6, 8, 2374, 2, 66},
        {8, 9, 4000, 2, 66}, {4, 16, 2004, 2, 20}, {8, 9, 4000, 4, 30}}) {
    SCOPED_TRACE(testing::Message() << tiles_m << " x " << tiles_n << " tiles of " << slices << " slices, clusters of "
                                    << blocks << ", " << resident << " at once");
    kernels::StreamKPlan plan = kernels::plan_stream_k(tiles_m * tiles_n, slices, 132, tiles_m);
    plan = kernels::cluster_stream_k(plan, tiles_m, 132, every_size(resident, blocks));
    ASSERT_EQ(plan.cluster, blocks);
    EXPECT_LE(plan.workers, std::min(132, resident * blocks));
    check_clusters(plan, tiles_m, tiles_n);
  }
}

// The plans of the GEMM tiles that take the rows as N (plan_rows_as_n): every tile cut into the
// same runs, and 2 to 7 row tiles in clusters of all of them, a grid of more than half a wave a
// tile a worker; workers cut to whole runs of the clusters that run at once.
TEST(StreamK, RowsAsNTilesAreCutAlikeAndRunInClustersOfTheirRowTiles) {
  const kernels::StreamKClusters h100 = h100_clusters();
  struct Case {
    int tiles_m, tiles_n, slices, workers, cluster;
  };
  // 333 rows of H 8192 (2 x 64 tiles: a tile a worker, in pairs) and of H 4096 (2 x 32: two runs a
  // tile); 600 rows (3 x 32, threes: 39 at once hold 96); 5 x 24 tiles of five (22 at once: 110
  // blocks hold fewer than 120 runs, so none).
  for (const Case& c : {Case{2, 64, 2004, 128, 2}, Case{2, 32, 2004, 128, 2}, Case{3, 32, 2004, 96, 3},
                        Case{2, 56, 253, 112, 2}, Case{5, 24, 300, 0, 1}}) {
    SCOPED_TRACE(testing::Message() << c.tiles_m << " x " << c.tiles_n << " tiles");
    const int tiles = c.tiles_m * c.tiles_n;
    const kernels::StreamKPlan plan = kernels::plan_rows_as_n(tiles, c.slices, 132, c.tiles_m, true, h100);
    EXPECT_EQ(plan.workers, c.workers);
    EXPECT_EQ(plan.cluster, c.cluster);
    if (plan.cluster > 1) {
      EXPECT_EQ(plan.workers % tiles, 0) << "every tile in as many runs";
      check_clusters(plan, c.tiles_m, c.tiles_n);
    }
  }
  // One row tile: split into runs a multiple of the tiles apart, alone.
  const kernels::StreamKPlan one = kernels::plan_rows_as_n(32, 2004, 132, 1, true, h100);
  EXPECT_EQ(one.workers, 128);
  EXPECT_EQ(one.cluster, 1);
  check_walk(one, kernels::stream_k_grid(one, 132, false));
  // No clusters measured (a filter's GEMMs): a wave of tiles whole, fewer split alike.
  EXPECT_EQ(kernels::plan_rows_as_n(128, 2004, 132, 2, true, kernels::StreamKClusters{}).workers, 0);
  EXPECT_EQ(kernels::plan_rows_as_n(64, 2004, 132, 2, true, kernels::StreamKClusters{}).workers, 128);
  // More than a wave of tiles: as plan_stream_k plans them.
  EXPECT_EQ(kernels::plan_rows_as_n(200, 2004, 132, 2, true, h100).cluster, 1);
  // No K slices (B without rows of data): whole, so that every tile writes its addend.
  const kernels::StreamKPlan empty = kernels::plan_rows_as_n(128, 0, 132, 2, true, h100);
  EXPECT_EQ(empty.workers, 0);
  EXPECT_EQ(kernels::stream_k_grid(empty, 132, false), 128);
  // SHARDJIT_SPLIT_CLUSTERS: 1 keeps every block alone; 2 takes pairs of four row tiles.
  EXPECT_EQ(kernels::plan_rows_as_n(128, 2004, 132, 2, true, h100_clusters(1)).workers, 0);
  const kernels::StreamKPlan pairs = kernels::plan_rows_as_n(64, 2004, 132, 4, true, h100_clusters(2));
  EXPECT_EQ(pairs.cluster, 2);
  check_clusters(pairs, 4, 16);
}

// The rule: plans split whole over 2 to 7 row tiles (kStreamKMaxCluster) take clusters of all of
// them; grids of less than a wave that plan_stream_k leaves whole (more than half a wave) are
// split whole in the clusters that keep the most blocks busy, where those are a third more than
// the tiles; nothing else is clustered.
TEST(StreamK, WhichPlansAreClusteredByTheRule) {
  const kernels::StreamKClusters h100 = h100_clusters();
  const kernels::StreamKPlan split = kernels::plan_stream_k(48, 2004, 132, 3);
  EXPECT_EQ(kernels::cluster_stream_k(split, 3, 132, kernels::StreamKClusters{}).cluster, 1) << "no clusters";
  EXPECT_EQ(kernels::cluster_stream_k(split, 1, 132, h100).cluster, 1) << "one row tile";
  EXPECT_EQ(kernels::cluster_stream_k(split, 3, 132, h100).cluster, 3);
  EXPECT_EQ(kernels::cluster_stream_k(split, 3, 132, h100).workers, 117) << "39 clusters of three at once";
  const kernels::StreamKPlan eight = kernels::plan_stream_k(8 * 8, 2374, 132, 8);
  ASSERT_TRUE(kernels::stream_k_split_whole(eight));
  EXPECT_EQ(kernels::cluster_stream_k(eight, 8, 132, h100).cluster, 1) << "more row tiles than a cluster takes";
  EXPECT_EQ(kernels::cluster_stream_k(eight, 8, 132, h100_clusters(4)).cluster, 4) << "asked for";
  EXPECT_EQ(kernels::cluster_stream_k(eight, 8, 132, h100_clusters(3)).cluster, 1) << "3 does not divide 8";
  const kernels::StreamKPlan seven = kernels::plan_stream_k(7 * 8, 2374, 132, 7);
  EXPECT_EQ(kernels::cluster_stream_k(seven, 7, 132, h100).cluster, 7);
  const kernels::StreamKPlan last_wave = kernels::plan_stream_k(140, 64, 132, 2);
  ASSERT_GT(last_wave.whole_tiles, 0);
  EXPECT_EQ(kernels::cluster_stream_k(last_wave, 2, 132, h100).cluster, 1) << "whole tiles before the split ones";
  const kernels::StreamKPlan waves = kernels::plan_stream_k(3 * 100, 128, 132, 3);
  EXPECT_EQ(kernels::cluster_stream_k(waves, 3, 132, h100).cluster, 1) << "more than a wave";
  const kernels::StreamKPlan few = kernels::plan_stream_k(2, 16, 132, 2);
  ASSERT_GT(few.workers, 0);
  EXPECT_EQ(kernels::cluster_stream_k(few, 2, 132, h100).workers, few.workers) << "fewer workers than fit";

  // Below a wave (grad_hidden at 1024 rows, whole-shard chunk): 8 row tiles.
  const kernels::StreamKPlan gemma = kernels::plan_stream_k(8 * 9, 4000, 132, 8);  // H 2304, 256000 columns
  ASSERT_EQ(gemma.workers, 0) << "more than half a wave: plan_stream_k leaves it whole";
  const kernels::StreamKPlan g = kernels::cluster_stream_k(gemma, 8, 132, h100);
  EXPECT_EQ(g.cluster, 2) << "66 pairs keep 128 blocks busy, 30 clusters of four 120";
  EXPECT_EQ(g.workers, 128);
  EXPECT_EQ(g.whole_tiles, 0);
  check_clusters(g, 8, 9);
  const kernels::StreamKPlan oss = kernels::cluster_stream_k(kernels::plan_stream_k(8 * 12, 3142, 132, 8), 8, 132, h100);
  EXPECT_EQ(oss.cluster, 2) << "96 tiles, 128 workers: a third more";
  EXPECT_EQ(kernels::cluster_stream_k(kernels::plan_stream_k(8 * 14, 2376, 132, 8), 8, 132, h100).cluster, 1)
      << "112 tiles: 128 workers are not a third more";
  // 333 rows (3 row tiles): at H 8192 the 96 tiles stay whole (117 workers in clusters of three
  // are not a third more); at H 7168 and 6144 (84 and 72 tiles) they are split.
  const kernels::StreamKPlan h8192 = kernels::plan_stream_k(3 * 32, 2004, 132, 3);
  ASSERT_EQ(h8192.workers, 0);
  EXPECT_EQ(kernels::cluster_stream_k(h8192, 3, 132, h100).workers, 0) << "96 tiles, 117 workers";
  EXPECT_EQ(kernels::cluster_stream_k(kernels::plan_stream_k(3 * 28, 2020, 132, 3), 3, 132, h100).workers, 117);
  EXPECT_EQ(kernels::cluster_stream_k(kernels::plan_stream_k(3 * 24, 788, 132, 3), 3, 132, h100).workers, 117);
  const kernels::StreamKPlan five = kernels::cluster_stream_k(kernels::plan_stream_k(5 * 16, 2004, 132, 5), 5, 132, h100);
  EXPECT_EQ(five.cluster, 5) << "600 rows at H 4096: 80 tiles, 22 clusters of five";
  EXPECT_EQ(five.workers, 110);
  check_clusters(five, 5, 16);
  EXPECT_EQ(kernels::cluster_stream_k(kernels::plan_stream_k(7 * 16, 2004, 132, 7), 7, 132, h100).cluster, 1)
      << "112 tiles, 15 clusters of seven: 105 workers";
  EXPECT_EQ(kernels::cluster_stream_k(gemma, 8, 132, kernels::StreamKClusters{}).workers, 0) << "no clusters";
  // Clusters of one (SHARDJIT_SPLIT_CLUSTERS=1): the split below a wave, each block alone, on as
  // many blocks as fit (here the pairs' 128).
  const kernels::StreamKPlan alone = kernels::cluster_stream_k(gemma, 8, 132, h100_clusters(1));
  EXPECT_EQ(alone.cluster, 1);
  EXPECT_EQ(alone.workers, 128);
  EXPECT_EQ(alone.whole_tiles, 0);
  EXPECT_EQ(kernels::stream_k_block_worker(alone, 5), 5);
  check_walk(alone, kernels::stream_k_grid(alone, 132, false));
  EXPECT_EQ(kernels::cluster_stream_k(kernels::plan_stream_k(8 * 9, 2, 132, 8), 8, 132, h100).workers, 0)
      << "too little K to split";
}

// grad_hidden at llama3-8b-decode: 32 tiles of 2004 slices. Split, every block computes about
// 486 slices, a quarter of a tile, against a whole tile for 32 blocks and nothing for 100.
TEST(StreamK, FewTilesKeepEveryBlockBusy) {
  const kernels::StreamKPlan plan = kernels::plan_stream_k(32, 2004, 132);
  const int grid = kernels::stream_k_grid(plan, 132, false);
  ASSERT_EQ(grid, 132);
  const Walked w = walk_all(plan, grid);
  const auto [fewest, most] = std::minmax_element(w.slices_per_block.begin(), w.slices_per_block.end());
  EXPECT_GE(*fewest, 32 * 2004 / 132);
  EXPECT_LE(*most, 32 * 2004 / 132 + 1);
}

}  // namespace
}  // namespace shardjit
