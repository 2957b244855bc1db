// How the forward is laid out on the GPU: vocabulary splits and the kernels an op loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/tile_order.cuh"
#include "linear_logp/fwd_block_order.cuh"
#include "runtime/arch/arch.hpp"
#include "runtime/compile/template_registry.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "runtime/prewarm/plan.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

const GpuShape kH200{132, 60ll << 20};

// Every block of the grid gets its own tile, and a group's blocks run row tile fastest.
TEST(TileOrder, GroupedOrderCoversEveryTileOnce) {
  for (auto [tiles_m, tiles_n, group] : {std::tuple{128, 8, 17}, {7, 3, 8}, {1, 5, 4}, {33, 1, 16}, {5, 9, 1}}) {
    std::vector<int> seen(static_cast<std::size_t>(tiles_m * tiles_n), 0);
    for (int id = 0; id < tiles_m * tiles_n; ++id) {
      const kernels::TileIndex t = kernels::grouped_tile_index(id, tiles_m, tiles_n, group);
      ASSERT_TRUE(t.m >= 0 && t.m < tiles_m && t.n >= 0 && t.n < tiles_n) << id;
      ++seen[static_cast<std::size_t>(t.m * tiles_n + t.n)];
    }
    for (int count : seen) EXPECT_EQ(count, 1) << tiles_m << " x " << tiles_n << " in groups of " << group;
    const kernels::TileIndex second = kernels::grouped_tile_index(1, tiles_m, tiles_n, group);
    if (tiles_m > 1 && group > 1) {
      EXPECT_EQ(second.m, 1) << "the next block is the next row tile of the same column";
      EXPECT_EQ(second.n, 0);
    }
  }
}


TEST(VocabSplits, RowsThatFitInL2UseFewSplits) {
  VocabSplit plan = choose_vocab_splits(2048, 4096, 128256, FwdTile{}, kH200);  // X: 8 MiB
  EXPECT_LE(plan.splits, 8);
  EXPECT_GE(plan.splits * 16, 100) << "16 row tiles still need splits to fill 132 SMs";
}

TEST(VocabSplits, LargeBatchesSplitSoTheRunningRowTilesFitInL2) {
  // X is 128 MiB at 16k rows x 4096 bf16: with one split all 128 row tiles would run at once.
  for (const GpuShape gpu : {GpuShape{132, 50ll << 20}, kH200}) {
    for (std::int64_t n : {8192, 16384, 32768}) {
      const VocabSplit plan = choose_vocab_splits(n, 8192, 128256, FwdTile{}, gpu);
      EXPECT_LE(static_cast<std::int64_t>(plan.group_rows) * 128 * 8192, gpu.l2_bytes / kRunningXL2Share) << n;
      EXPECT_EQ(plan.splits, 16) << n << " rows: 8 splits' 17 row tiles (17 MiB) ran 1.22-1.29 x at 32768 rows";
    }
  }
}

// One wave whose row tiles have kXSharingSplits splits each, where it fills the GPU within the
// tolerance, before counts of several waves that fit: at 4097 rows (33 row tiles, 4 splits fill
// 132 multiprocessors) the splits of a row tile read its K slices together. Measured faster than
// the counts of several waves at every head tried: qwen2.5-72b's TP4 shard and gpt-neox-20b's
// head (H 6144, where the H200's 60 MiB held 8 splits' rows), llama3-8b, qwen2.5-7b, deepseek-v3
// and qwen3-1.7b (H 2048, whose 8 splits' rows fit a quarter of either L2).
TEST(VocabSplits, OneWaveOfFourSplitsARowTileReadsXTogether) {
  const FwdTile hopper{128, 256, 64, 4};
  const GpuShape h100{132, 50ll << 20};
  for (const GpuShape gpu : {h100, kH200}) {
    for (auto [hidden, vocab] : {std::pair{8192, 38016}, {6144, 50432}, {4096, 128256}, {3584, 152064}, {7168, 129280},
                                 {2048, 151936}}) {
      EXPECT_EQ(choose_vocab_splits(4097, hidden * 2, vocab, hopper, gpu).splits, kXSharingSplits)
          << hidden << " x " << vocab << ", L2 " << (gpu.l2_bytes >> 20) << " MiB";
    }
  }
  // 24 row tiles: one wave of 5 splits (or of 4) leaves 12 multiprocessors idle or more, outside
  // the tolerance; 16 splits over several waves fit.
  EXPECT_EQ(choose_vocab_splits(3000, 4096 * 2, 128256, hopper, h100).splits, 16);
}

// Over several waves the last two are cut into pieces, so the counts fill the GPU about alike and
// the fewest whose running X rows fit decides: llama3-70b's head (H = 8192) at 16384 rows, whole
// and with a kept chunk ahead of the forward kernel's 405 or 341 vocabulary tiles. 1 to 8 splits
// stream X from memory (one split ran the forward about twice as long on an H100, four 6 % longer
// than sixteen), 16 run 9 row tiles of 2 MiB at once, over a quarter of the L2, and 64, which
// filled the uncut waves best, ran 1.07-1.13 x cuBLAS against 32's 1.04 x.
TEST(VocabSplits, OverSeveralWavesTheFewestSplitsWhoseXFits) {
  const FwdTile hopper{128, 256, 64, 4};
  for (const GpuShape gpu : {GpuShape{132, 50ll << 20}, kH200}) {
    for (const std::int64_t valid : {501 * 256, 405 * 256, 341 * 256}) {
      const VocabSplit plan = choose_vocab_splits(16384, 8192 * 2, valid, hopper, gpu);
      SCOPED_TRACE(std::to_string(valid / 256) + " tiles, L2 " + std::to_string(gpu.l2_bytes >> 20) + " MiB");
      EXPECT_EQ(plan.splits, 32);
      EXPECT_LE(static_cast<std::int64_t>(std::min(plan.group_rows, plan.row_tiles)) * 128 * 8192 * 2,
                gpu.l2_bytes / kRunningXL2Share);
    }
  }
  // Tensor parallelism does not cut its last waves: there the uncut waves' fill counts, within
  // its wider tolerance (128 splits fill them best, 97.2 %; 32 fill 94.9 %).
  const VocabSplit tp = choose_vocab_splits(16384, 8192 * 2, 128256, hopper, kH200, 0.05, 128, false);
  EXPECT_EQ(tp.splits, 32);
  EXPECT_EQ(choose_vocab_splits(16384, 8192 * 2, 128256, hopper, kH200, 0.01, 128, false).splits, 64)
      << "within one point of the best uncut fill: 1, 2, 4 and 8 (96.4-97.0 %, their X over the L2's share) "
         "and 64, which fits";
}

// A group of the block order is the row tiles one wave of blocks holds.
TEST(VocabSplits, GroupRowsAreTheRowTilesOfOneWave) {
  EXPECT_EQ(choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).splits, 16);
  EXPECT_EQ(choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).group_rows, 9);
  EXPECT_EQ(choose_vocab_splits(1, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).group_rows,
            (132 + 127) / 128);
  EXPECT_GE(choose_vocab_splits(1, 8192, 128256, FwdTile{}, GpuShape{0, 0}).group_rows, 1)
      << "never zero, whatever the device reports";
}

TEST(VocabSplits, EfficiencyCountsTheWavesOfTheLongestSplitOrPiece) {
  const VocabSplit whole = fixed_vocab_splits(16384, 128256, FwdTile{128, 256, 64, 4, true}, kH200, 8);
  EXPECT_DOUBLE_EQ(fwd_plan_efficiency(whole, 132), 128.0 * 501 / (8 * 132 * 63));
  EXPECT_DOUBLE_EQ(fwd_plan_efficiency(fixed_vocab_splits(256, 128256, FwdTile{}, kH200, 64), 132),
                   2.0 * 501 / (132 * 8));
  // Cut: 6 waves of whole units of 63 tiles, then 1 856 pieces of 8 tiles in 15 waves.
  EXPECT_DOUBLE_EQ(fwd_plan_efficiency(cut_last_waves(whole, 132), 132), 128.0 * 501 / (132 * (6 * 63 + 15 * 8)));
}

TEST(VocabSplits, SmallBatchesSplitTheVocabularyToFillTheGpu) {
  VocabSplit plan = choose_vocab_splits(256, 8192, 128256, FwdTile{}, kH200);
  EXPECT_GE(plan.splits * 2, 100) << "two row tiles need many splits to fill 132 SMs";
  EXPECT_LE(plan.splits * 2, 132) << "one wave";
}

TEST(VocabSplits, AFixedCountIsKeptWithinTheTilesAndTheCombine) {
  const FwdTile tile{128, 256, 64, 4, true};
  VocabSplit plan = fixed_vocab_splits(7, 128256, tile, kH200, 132);
  EXPECT_EQ(plan.splits, 132) << "every multiprocessor, a count the rule never picks";
  EXPECT_EQ(plan.group_rows, 1);
  EXPECT_EQ(plan.row_tiles, 1);
  EXPECT_EQ(plan.vocab_tiles, 501);
  EXPECT_EQ(plan.blocks(), 132);
  EXPECT_EQ(plan.sources(), 132);
  plan = fixed_vocab_splits(333, 128256, tile, kH200, 40);
  EXPECT_EQ(plan.splits, 40);
  EXPECT_EQ(plan.group_rows, 4) << "ceil(132 / 40) row tiles run at once";
  EXPECT_EQ(plan.units(), 3 * 40);
  EXPECT_EQ(fixed_vocab_splits(7, 1000, tile, kH200, 256).splits, 4) << "at most the vocabulary tiles";
  EXPECT_EQ(fixed_vocab_splits(7, 1 << 20, tile, kH200, 5000).splits, kMaxCombineSources);
  EXPECT_EQ(fixed_vocab_splits(7, 128256, tile, kH200, 0).splits, 1);
}

// Split s of S walks the vocabulary tiles [s P, min((s + 1) P, V)), P = ceil(V / S), as the
// kernel does.
std::int64_t split_tiles(std::int64_t vocab_tiles, int splits, int s) {
  const std::int64_t per = (vocab_tiles + splits - 1) / splits;
  return std::max<std::int64_t>(0, std::min(vocab_tiles, (s + 1) * per) - std::min(vocab_tiles, s * per));
}

TEST(VocabSplits, NeverMoreSplitsThanTilesAndEveryTileInOneSplit) {
  for (std::int64_t vocab : {1, 128, 129, 300, 1000, 128256}) {
    for (std::int64_t n : {1, 300, 16384}) {
      const VocabSplit plan = choose_vocab_splits(n, 8192, vocab, FwdTile{}, kH200);
      const std::int64_t tiles = (vocab + 127) / 128;
      EXPECT_LE(plan.splits, tiles) << vocab;
      EXPECT_GE(plan.splits, 1) << vocab;
      std::int64_t covered = 0;
      const std::int64_t per = (tiles + plan.splits - 1) / plan.splits;
      for (int s = 0; s < plan.splits; ++s) {
        const std::int64_t mine = split_tiles(tiles, plan.splits, s);
        EXPECT_LE(mine, per);
        if (s < tiles / per) {
          EXPECT_EQ(mine, per) << "the splits before the last one that has tiles are whole";
        }
        covered += mine;
      }
      EXPECT_EQ(covered, tiles) << vocab << " columns, " << n << " rows";
    }
  }
}

TEST(VocabSplits, AreAlwaysOneOfTheCandidatesAndAtMostTheCap) {
  for (std::int64_t n : {1, 7, 100, 129, 333, 1000, 4096, 100000}) {
    const VocabSplit plan = choose_vocab_splits(n, 8192, 151936, FwdTile{}, kH200);
    const std::vector<int> candidates = vocab_split_candidates(plan.row_tiles, plan.vocab_tiles, kH200.sm_count);
    EXPECT_NE(std::find(candidates.begin(), candidates.end(), plan.splits), candidates.end()) << n;
    EXPECT_LE(choose_vocab_splits(n, 8192, 151936, FwdTile{}, kH200, 0.02, 16).splits, 16);
  }
}

TEST(VocabSplits, CandidatesAreThePowersOfTwoTheOneWaveAndTheOneTileCounts) {
  const std::vector<int> powers(kVocabSplitChoices.begin(), kVocabSplitChoices.end());
  EXPECT_EQ(vocab_split_candidates(3, 501, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 44, 64, 128}));
  EXPECT_EQ(vocab_split_candidates(2, 501, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 66, 128}));
  EXPECT_EQ(vocab_split_candidates(33, 501, 132), powers) << "4 is a power of two already";
  EXPECT_EQ(vocab_split_candidates(1, 501, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 132}))
      << "one row tile: a block on every multiprocessor";
  EXPECT_EQ(vocab_split_candidates(200, 501, 132), powers) << "under one block per row tile";
  // A block a tile where they fit one wave.
  EXPECT_EQ(vocab_split_candidates(1, 63, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 63, 64, 128}));
  EXPECT_EQ(vocab_split_candidates(2, 63, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 63, 64, 128}))
      << "66 splits of 63 tiles leave three empty";
  EXPECT_EQ(vocab_split_candidates(3, 63, 132), (std::vector<int>{1, 2, 4, 8, 16, 32, 44, 64, 128}))
      << "189 blocks are more than a wave";
  EXPECT_EQ(vocab_split_candidates(1, 64, 132), powers) << "64 is a power of two already";
  EXPECT_EQ(vocab_split_candidates(1, 1, 132), powers) << "one split is a candidate already";
}

// Few rows over a shard of few vocabulary tiles: one wave of one-tile blocks, as many as the tiles,
// instead of the power of two below them, whose splits take two tiles each (or leave some empty).
TEST(VocabSplits, AShardOfFewTilesTakesABlockATileWhereTheyFitOneWave) {
  const FwdTile hopper{128, 256, 64, 4, true};
  for (std::int64_t n : {1, 7, 128}) {
    EXPECT_EQ(choose_vocab_splits(n, 2 * 8192, 16032, hopper, kH200).splits, 63) << "llama3-70b's TP8 shard, " << n;
    EXPECT_EQ(choose_vocab_splits(n, 2 * 4096, 32000, hopper, kH200).splits, 125) << "llama2-7b, " << n;
    EXPECT_EQ(choose_vocab_splits(n, 2 * 7168, 16160, hopper, kH200).splits, 64) << "deepseek-v3's TP8 shard, " << n;
  }
  EXPECT_EQ(choose_vocab_splits(256, 2 * 8192, 16032, hopper, kH200).splits, 63) << "126 blocks, one wave";
  EXPECT_EQ(choose_vocab_splits(333, 2 * 8192, 16032, hopper, kH200).splits, 32) << "189 would be more than a wave";
  // The standard shapes' heads have hundreds of tiles: their splits are as before.
  EXPECT_EQ(choose_vocab_splits(1, 2 * 4096, 128256, hopper, kH200).splits, 128);
  EXPECT_EQ(choose_vocab_splits(333, 2 * 4096, 128256, hopper, kH200).splits, 44);
  // Tensor parallelism's wider tolerance and cap take it too (8 ranks x 63 sources fit one combine).
  EXPECT_EQ(choose_vocab_splits(7, 2 * 8192, 16032, hopper, kH200, 0.05, 128).splits, 63);
}

TEST(VocabSplits, AFewRowTilesTakeOneFullWaveOfLongBlocks) {
  // 333 rows at llama3-8b on the Hopper tile: 3 row tiles x 501 vocabulary tiles. 44 splits (12
  // tiles a block, one wave of 132) tie 128 (4 tiles a block, 2.9 waves) on paper; the fewer,
  // longer blocks ran 16 % faster.
  const FwdTile hopper{128, 256, 64, 4, true};
  EXPECT_EQ(choose_vocab_splits(333, 8192, 128256, hopper, kH200).splits, 44);
  EXPECT_EQ(cut_last_waves(choose_vocab_splits(333, 8192, 128256, hopper, kH200), kH200.sm_count).blocks(), 132);
  // Two row tiles keep 64 splits (128 blocks), which ties the one-wave 66 with fewer splits.
  EXPECT_EQ(choose_vocab_splits(256, 8192, 128256, hopper, kH200).splits, 64);
}

TEST(VocabSplits, PartialRowsBoundEveryCallUpToTheRows) {
  const FwdTile tile{128, 256, 64, 3};
  auto sources_for = [&](std::int64_t rows) {
    return cut_last_waves(choose_vocab_splits(rows, 8192, 128256, tile, kH200), kH200.sm_count).sources();
  };
  const std::int64_t bound = max_partial_rows(16384, tile.bm, sources_for);
  std::int64_t most = 0;
  for (std::int64_t n = 1; n <= 16384; ++n) most = std::max(most, n * sources_for(n));
  EXPECT_EQ(bound, most);
}

TEST(VocabSplits, PartialRowsBoundSourcesThatFallWithinARowTile) {
  // A call keeps its one whole chunk (a source per column tile) up to 1046 rows, then two chunks
  // of about half the tiles: the most is at 1046 rows, inside the row tile (1024, 1152].
  auto sources_for = [](std::int64_t rows) { return rows <= 1046 ? 501 : 260; };
  EXPECT_GE(max_partial_rows(2000, 128, sources_for), 1046 * 501);
  EXPECT_LE(max_partial_rows(2000, 128, sources_for), 1152 * 501) << "one tile's rows over, at most";
}

// The kernel's block arithmetic (fwd_block_work, fwd_block_tiles) on the host: every (row tile,
// vocabulary tile) is computed by exactly one block, and every partial source of every row tile
// is written by exactly one block, with or without cut units.
void expect_blocks_cover_once(const VocabSplit& p) {
  SCOPED_TRACE(std::to_string(p.row_tiles) + " row tiles x " + std::to_string(p.vocab_tiles) + " tiles, " +
               std::to_string(p.splits) + " splits, " + std::to_string(p.whole_units) + " whole units, " +
               std::to_string(p.unit_pieces) + " pieces");
  std::vector<int> tiles(static_cast<std::size_t>(p.row_tiles) * p.vocab_tiles, 0);
  std::vector<int> sources(static_cast<std::size_t>(p.row_tiles) * p.sources(), 0);
  for (int block = 0; block < p.blocks(); ++block) {
    const kernels::FwdBlockWork w = kernels::fwd_block_work(block, p.row_tiles, p.splits, p.group_rows, p.whole_units);
    ASSERT_TRUE(w.row_tile >= 0 && w.row_tile < p.row_tiles && w.split >= 0 && w.split < p.splits) << block;
    ASSERT_TRUE(w.piece >= -1 && w.piece < p.unit_pieces) << block;
    const kernels::TileRange r = kernels::fwd_block_tiles(w, p.splits, p.unit_pieces, p.vocab_tiles);
    ASSERT_TRUE(r.begin >= 0 && r.begin <= r.end && r.end <= p.vocab_tiles) << block;
    for (int t = r.begin; t < r.end; ++t) ++tiles[static_cast<std::size_t>(w.row_tile) * p.vocab_tiles + t];
    const int first = w.split * p.unit_pieces;
    if (w.piece >= 0) {
      ++sources[static_cast<std::size_t>(first + w.piece) * p.row_tiles + w.row_tile];
    } else {
      for (int c = 0; c < p.unit_pieces; ++c) ++sources[static_cast<std::size_t>(first + c) * p.row_tiles + w.row_tile];
    }
  }
  EXPECT_EQ(std::count(tiles.begin(), tiles.end(), 1), static_cast<std::ptrdiff_t>(tiles.size()));
  EXPECT_EQ(std::count(sources.begin(), sources.end(), 1), static_cast<std::ptrdiff_t>(sources.size()));
}

TEST(CutLastWaves, EveryTileOnceAndEverySourceOnce) {
  for (std::int64_t n : {1, 129, 1000, 3000, 4096, 7500, 16384}) {
    for (std::int64_t vocab : {1, 300, 3001, 60000, 128256}) {
      for (const FwdTile& tile : {FwdTile{128, 256, 64, 4, true}, FwdTile{128, 128, 32, 3}}) {
        const VocabSplit whole = choose_vocab_splits(n, 8192, vocab, tile, kH200);
        EXPECT_EQ(whole.whole_units, whole.units()) << "choose_vocab_splits runs every unit whole";
        expect_blocks_cover_once(whole);
        expect_blocks_cover_once(cut_last_waves(whole, kH200.sm_count));
        expect_blocks_cover_once(cut_last_waves(whole, 100));
      }
    }
  }
}

// llama3-8b at 16k rows: 2 048 units of 32 tiles, 15 waves of 132 and 68 units. The last full
// wave and the partial one are cut into pieces of 8 tiles.
TEST(CutLastWaves, CutsTheLastTwoWavesIntoPiecesOfAboutEightTiles) {
  const VocabSplit whole = choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4, true}, kH200);
  ASSERT_EQ(whole.units(), 2048);
  const VocabSplit cut = cut_last_waves(whole, 132);
  EXPECT_EQ(cut.splits, whole.splits);
  EXPECT_EQ(cut.whole_units, 14 * 132);
  EXPECT_EQ(cut.unit_pieces, 4);
  EXPECT_EQ(kernels::fwd_piece_tiles(cut.split_tiles(), cut.unit_pieces), 8);
  EXPECT_EQ(cut.blocks(), 1848 + 200 * 4);
  EXPECT_EQ(cut.sources(), 64);
}

// A shard of 2.2 M ids at 4096 rows in 8 splits would be cut into 135 pieces a split, 1 080
// sources: more than one combine merges. The pieces grow longer instead.
TEST(CutLastWaves, AVeryLongShardKeepsItsSourcesWithinOneCombine) {
  const VocabSplit whole = fixed_vocab_splits(4096, 2200000, FwdTile{128, 256, 64, 4, true}, kH200, 8);
  const VocabSplit cut = cut_last_waves(whole, kH200.sm_count);
  EXPECT_GT(cut.unit_pieces, 1);
  EXPECT_LE(cut.sources(), kMaxCombineSources);
  expect_blocks_cover_once(cut);
}

TEST(CutLastWaves, OneWaveOrShortSplitsStayWhole) {
  const FwdTile tile{128, 256, 64, 4, true};
  const VocabSplit decode = cut_last_waves(choose_vocab_splits(256, 8192, 128256, tile, kH200), 132);
  EXPECT_EQ(decode.unit_pieces, 1) << "128 units: one wave";
  EXPECT_EQ(decode.blocks(), decode.units());
  EXPECT_EQ(decode.sources(), decode.splits);
  const VocabSplit short_splits = cut_last_waves(choose_vocab_splits(16384, 8192, 3001, tile, kH200), 132);
  EXPECT_EQ(short_splits.unit_pieces, 1) << "splits of a few tiles: no piece of 8";
}

// The gpu tier's cut cases (tests/gpu/linear_logp_fwd_test.cpp) are cut on an H200's 132
// multiprocessors, as their comment says.
TEST(CutLastWaves, TheGpuTestsCutCasesAreCut) {
  const VocabSplit bf16 = cut_last_waves(
      choose_vocab_splits(5000, 64 * 2, 60000, FwdTile{128, 256, 64, 4, true}, kH200), kH200.sm_count);
  EXPECT_GT(bf16.whole_units, 0);
  EXPECT_GE(bf16.unit_pieces, 2);
  const VocabSplit fp32 = cut_last_waves(
      choose_vocab_splits(2500, 64 * 4, 60000, default_fwd_tile(DType::kFP32, "sm_90a", true), kH200),
      kH200.sm_count);
  EXPECT_GT(fp32.whole_units, 0);
  EXPECT_GE(fp32.unit_pieces, 4);
}

// The forward kernel merges where each row tile's merge is one pass of its 256 compute threads, a
// row to combine_lanes_per_row(S) lanes (1 below 8 sources, then doubling up to 32).
TEST(FwdMerge, InTheKernelWhereARowTileIsOnePass) {
  EXPECT_TRUE(fwd_merges_in_kernel(1, 128, 1));
  EXPECT_TRUE(fwd_merges_in_kernel(7, 128, 63));     // 8 lanes a row: 32 rows a pass
  EXPECT_TRUE(fwd_merges_in_kernel(32, 128, 63));
  EXPECT_FALSE(fwd_merges_in_kernel(33, 128, 63));
  EXPECT_TRUE(fwd_merges_in_kernel(16, 128, 64));    // 16 lanes: 16 rows a pass
  EXPECT_FALSE(fwd_merges_in_kernel(17, 128, 64));
  EXPECT_TRUE(fwd_merges_in_kernel(8, 128, 128));    // 32 lanes: 8 rows a pass
  EXPECT_FALSE(fwd_merges_in_kernel(9, 128, 1024));
  EXPECT_FALSE(fwd_merges_in_kernel(64, 128, 132));  // eight passes
  EXPECT_TRUE(fwd_merges_in_kernel(100000, 128, 7));  // one lane a row: 128 rows of a tile in one pass
  EXPECT_TRUE(fwd_merges_in_kernel(100000, 128, 15));  // two lanes
  EXPECT_FALSE(fwd_merges_in_kernel(16384, 128, 64));  // llama3-8b-16k's 16 splits of 4 pieces
  EXPECT_FALSE(fwd_merges_in_kernel(333, 128, 44));    // the one-wave count at three row tiles
}

constexpr FwdTile kWide{128, 256, 64, 4, true};
constexpr FwdTile kNarrow{128, 128, 64, 4, true};
constexpr FwdTile kOthers[] = {kNarrow, FwdTile{128, 192, 64, 4, true}};

// The columns of the tile the launch LinearLogp::Impl::vocab_split makes of a bf16 call runs.
int tile_cols_at(std::int64_t n, std::int64_t hidden, std::int64_t valid, const GpuShape& gpu = kH200) {
  return choose_fwd_plan(n, hidden * 2, valid, kWide, kOthers, gpu).tile_cols;
}

TEST(OtherTiles, FillTheOneWaveWhereTheWideTilesLeaveItIdle) {
  // Three row tiles of a TP8 shard: 189 wide tiles take two tile times on 132 multiprocessors,
  // 378 narrow ones three narrow ones (1.92), 252 of 192 columns two (1.58).
  EXPECT_EQ(tile_cols_at(333, 8192, 16032), 192);
  EXPECT_EQ(tile_cols_at(333, 7168, 16160), 192);
  // Four wide tile times against five of 192 columns (3.95) and seven narrow ones (4.48).
  EXPECT_EQ(tile_cols_at(333, 8192, 38016), 256);
  // Two row tiles: three wide tile times against three of 192 columns (2.37).
  EXPECT_EQ(tile_cols_at(256, 8192, 38016), 192);
  // A block a tile in every width: a narrow tile (0.64) ends before one of 192 columns (0.79).
  EXPECT_EQ(tile_cols_at(129, 4096, 1000), 128);
  // Many row tiles run several waves.
  EXPECT_EQ(tile_cols_at(4096, 4096, 128256), 256);
  EXPECT_EQ(tile_cols_at(16384, 8192, 16032), 256);
}

// One row tile reads W at the memory's pace, and narrow tiles never give the busiest
// multiprocessor more of it to read.
TEST(OtherTiles, TheNarrowestRunsEveryCallOfOneRowTile) {
  for (std::int64_t n : {1, 7, 64, 128}) {
    for (std::int64_t valid : {1, 300, 16032, 32000, 38016, 50277, 128256, 151936, 256000}) {
      EXPECT_EQ(tile_cols_at(n, 4096, valid), 128) << n << " rows, " << valid << " columns";
      const VocabSplit wide = choose_fwd_plan(n, 4096 * 2, valid, kWide, {}, kH200);
      const VocabSplit narrow = choose_fwd_plan(n, 4096 * 2, valid, kWide, kOthers, kH200);
      EXPECT_LE(fwd_plan_busiest_tiles(narrow, kH200.sm_count), 2 * fwd_plan_busiest_tiles(wide, kH200.sm_count))
          << n << " rows, " << valid << " columns";
    }
  }
  // gpt-neox-20b: 99 blocks of two wide tiles against three narrow ones on every multiprocessor.
  const VocabSplit plan = choose_fwd_plan(1, 6144 * 2, 50277, kWide, kOthers, kH200);
  EXPECT_EQ(plan.splits, 132);
  EXPECT_EQ(fwd_plan_busiest_tiles(plan, kH200.sm_count), 3);
}

TEST(OtherTiles, ThePlanIsInTheChosenTilesAndWithoutOthersInTheOpsOwn) {
  const VocabSplit other = choose_fwd_plan(333, 8192 * 2, 16032, kWide, kOthers, kH200);
  ASSERT_EQ(other.tile_cols, 192);
  EXPECT_EQ(other.vocab_tiles, 84) << "counted in 192-column tiles";
  EXPECT_EQ(other.row_tiles, 3);
  EXPECT_EQ(fwd_plan_busiest_tiles(other, kH200.sm_count), 2);
  const VocabSplit narrow = choose_fwd_plan(333, 8192 * 2, 16032, kWide, std::span(kOthers, 1), kH200);
  ASSERT_EQ(narrow.tile_cols, 128);
  EXPECT_EQ(narrow.vocab_tiles, 126);
  EXPECT_EQ(fwd_plan_busiest_tiles(narrow, kH200.sm_count), 3);
  const VocabSplit wide = choose_fwd_plan(333, 8192 * 2, 16032, kWide, {}, kH200);
  EXPECT_EQ(wide.tile_cols, 256);
  EXPECT_EQ(wide.vocab_tiles, 63);
  EXPECT_EQ(fwd_plan_busiest_tiles(wide, kH200.sm_count), 2);
}

// The tiles of the rows as N (136, 152 or 168 x 128) where 128-row tiles would pad a call's rows
// enough to pay for their dearer fold (fwd_tile_cost by K slices) and block end (kRowsAsNBlockEnd):
// 150 rows in one row tile rather than two, 260-333 rows of a long K in two rather than three. Not
// at one 128-row tile, nor where 128-row tiles pad nothing, nor at a short K.
TEST(OtherTiles, TheRowsAsNTakeCallsThat128RowTilesPad) {
  const std::vector<FwdTile> hopper = hopper_other_fwd_tiles(DType::kBF16, "sm_90a", true);
  ASSERT_TRUE(hopper.back().rows_as_n) << "the Hopper tiles include the rows as N, last";
  const auto plan_at = [&](std::int64_t n, std::int64_t hidden, std::int64_t valid) {
    return choose_fwd_plan(n, hidden * 2, valid, kWide, hopper, kH200);
  };
  // qwen2.5-72b's TP4 shard at 333 rows: 297 tiles of the rows as N in each of two row tiles, five
  // on the busiest multiprocessor (5 x (0.62 + 3.5 / 128) + 0.20 wide tile times), against four wide
  // ones.
  const VocabSplit tp4 = plan_at(333, 8192, 38016);
  EXPECT_TRUE(tp4.rows_as_n);
  EXPECT_EQ(tp4.tile_cols, 128);
  EXPECT_EQ(tp4.tile_rows, 168);
  EXPECT_EQ(tp4.row_tiles, 2);
  EXPECT_EQ(tp4.vocab_tiles, 297);
  EXPECT_EQ(fwd_plan_busiest_tiles(tp4, kH200.sm_count), 5);
  EXPECT_NEAR(fwd_plan_time(tp4, kH200.sm_count, 128),
              5 * (kRowsAsNTileCost + kRowsAsNSliceCost / 128) + kRowsAsNBlockEnd, 1e-9);
  // A TP8 shard at 333 rows: two tiles of 168 x 128 a block (1.49 wide tile times), against the 128
  // x 192 tiles' 1.58 and two wide ones. One 168 x 256 tile a block (1.39) would count only from two
  // a multiprocessor (kRowsAsNFittedBusiestTiles).
  const VocabSplit tp8 = plan_at(333, 8192, 16032);
  EXPECT_TRUE(tp8.rows_as_n);
  EXPECT_EQ(tp8.tile_rows, 168);
  EXPECT_EQ(tp8.tile_cols, 128);
  EXPECT_EQ(fwd_plan_busiest_tiles(tp8, kH200.sm_count), 2);
  // llama3-8b's head, 16 tiles a multiprocessor in two row tiles against 12 wide ones in three:
  // at 260 rows of 136 (9.54 wide tile times), at 300 of 152 (10.27), at 333 of 168 (11.00). At 150
  // rows one row tile of 152 (8 tiles, 5.22, against 8 wide ones in two row tiles).
  EXPECT_EQ(plan_at(150, 4096, 128256).tile_rows, 152);
  EXPECT_EQ(plan_at(260, 4096, 128256).tile_rows, 136);
  const VocabSplit at300 = plan_at(300, 4096, 128256);
  EXPECT_TRUE(at300.rows_as_n);
  EXPECT_EQ(at300.tile_rows, 152);
  EXPECT_EQ(at300.row_tiles, 2);
  EXPECT_EQ(at300.tile_cols, 256);
  EXPECT_EQ(fwd_plan_busiest_tiles(at300, kH200.sm_count), 8);
  EXPECT_EQ(plan_at(333, 4096, 128256).tile_rows, 168);
  for (std::int64_t n : {1, 7, 64, 128, 256, 512, 4097}) {
    EXPECT_FALSE(plan_at(n, 4096, 128256).rows_as_n) << n << " rows";
  }
  // A short K: phi3-mini's head at 333 rows, two tiles of 168 x 256 (2.84), where four of 168 x 128
  // (2.97) lost to three wide ones; at 150 rows two of 152 x 128 (1.48) against two wide ones, one
  // of 152 x 256 counting only from two a multiprocessor.
  EXPECT_TRUE(plan_at(333, 3072, 32064).rows_as_n);
  EXPECT_EQ(plan_at(333, 3072, 32064).tile_cols, 256);
  EXPECT_TRUE(plan_at(150, 3072, 32064).rows_as_n);
  EXPECT_EQ(plan_at(150, 3072, 32064).tile_cols, 128);
  // A padded shard; one row tile; the gpu tier's case of the rule (n150_h4096_v31903_rows_as_n_by_rule:
  // a vocabulary tail of 31 columns).
  EXPECT_TRUE(plan_at(333, 8192, 37967).rows_as_n);
  EXPECT_TRUE(plan_at(150, 3000, 60000).rows_as_n);
  EXPECT_TRUE(plan_at(150, 4096, 31903).rows_as_n);
  // One tile a multiprocessor (kRowsAsNFittedBusiestTiles): 150 rows of the TP8 shards would run 126 or 127
  // tiles of 152 rows, one a multiprocessor (0.79 wide tile times at 112 or 128 K slices), against
  // one wide tile a multiprocessor in two row tiles; the wide tiles run.
  const auto rows152 = std::ranges::find_if(hopper, [](const FwdTile& t) { return t.rows_as_n && t.bm == 152; });
  ASSERT_NE(rows152, hopper.end());
  for (const auto& [hidden, valid] : {std::pair<std::int64_t, std::int64_t>{7168, 16160}, {8192, 16032}}) {
    const VocabSplit at150 = plan_at(150, hidden, valid);
    EXPECT_FALSE(at150.rows_as_n) << "H " << hidden;
    EXPECT_EQ(at150.tile_cols, 256) << "H " << hidden;
    EXPECT_EQ(at150.row_tiles, 2) << "H " << hidden;
    const VocabSplit as_n = choose_vocab_splits(150, hidden * 2, valid, *rows152, kH200);
    EXPECT_EQ(fwd_plan_busiest_tiles(as_n, kH200.sm_count), 1) << "H " << hidden;
    EXPECT_LT(fwd_plan_time(as_n, kH200.sm_count, hidden / 64), 0.95) << "the costs alone would take it";
  }
}

// A forward that would keep the backward's one chunk itself plans without the 256-column tiles of
// the rows as N, which have no keeping kernel: where the whole set takes them, it takes 128 columns
// or the rows as M, and a plan of the rows as N there always has a keeping kernel.
TEST(OtherTiles, AKeepingForwardPlansWithoutThe256ColumnTilesOfTheRowsAsN) {
  const std::vector<FwdTile> hopper = hopper_other_fwd_tiles(DType::kBF16, "sm_90a", true);
  const std::vector<FwdTile> keeping = keeping_fwd_plan_tiles(hopper, false);
  ASSERT_EQ(keeping.size(), 5u) << "128 x 128, 128 x 192 and the three heights of 128 columns";
  const std::vector<FwdTile> with_entropy = keeping_fwd_plan_tiles(hopper, true);
  ASSERT_EQ(with_entropy.size(), 4u) << "with entropy, no keeping kernel of 168 rows";
  for (const FwdTile& t : with_entropy) EXPECT_TRUE(!t.rows_as_n || t.bm <= 152) << fwd_tile_name(t);
  for (const FwdTile& t : keeping) EXPECT_TRUE(!t.rows_as_n || t.bn == 128) << fwd_tile_name(t);
  // llama3-8b's head at 300 rows and phi3-mini's at 333: 256 columns in the whole set (above).
  for (const auto& [n, hidden, valid] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{300, 4096, 128256},
                                         {333, 3072, 32064}}) {
    const VocabSplit all = choose_fwd_plan(n, hidden * 2, valid, kWide, hopper, kH200);
    ASSERT_TRUE(all.rows_as_n && all.tile_cols == 256) << n << " x " << hidden;
    const VocabSplit kept = choose_fwd_plan(n, hidden * 2, valid, kWide, keeping, kH200);
    EXPECT_TRUE(!kept.rows_as_n || kept.tile_cols == 128) << n << " x " << hidden;
  }
  for (std::int64_t n = 1; n <= 1100; n += 37) {
    const VocabSplit kept = choose_fwd_plan(n, 8192, 16032, kWide, keeping, kH200);
    EXPECT_TRUE(!kept.rows_as_n || kept.tile_cols == 128) << n;
  }
}

// The cost of a tile of the rows as N falls with K towards kRowsAsNTileCost; a plan of it pays
// kRowsAsNBlockEnd a block on its busiest multiprocessor, other plans nothing beyond their tiles.
TEST(OtherTiles, TheRowsAsNCostByKSlicesAndBlockEnd) {
  EXPECT_NEAR(fwd_tile_cost(168, 128, true, 32), 0.729375, 1e-12);
  EXPECT_NEAR(fwd_tile_cost(168, 128, true, 64), 0.6746875, 1e-12);
  EXPECT_NEAR(fwd_tile_cost(168, 128, true, 128), 0.64734375, 1e-12);
  EXPECT_EQ(fwd_tile_cost(128, 256, false, 64), 1.0);
  EXPECT_EQ(fwd_tile_cost(128, 192, false, 8), 0.79);
  EXPECT_THROW(fwd_tile_cost(168, 192, true, 64), Error);
  EXPECT_THROW(fwd_tile_cost(160, 128, true, 64), Error) << "no kernel of 160 rows";
  // Narrower tiles of the rows as N: fewer products, each row moving more shared memory
  // (rows_as_n_slice_work: 0.695 at 152 rows, 0.648 at 136, against 0.742 at 168), and a fold
  // by the rows.
  EXPECT_NEAR(fwd_tile_cost(152, 128, true, 64), 0.62 * 0.695313 / 0.742188 + 152.0 / 168 * 3.5 / 64, 1e-5);
  EXPECT_NEAR(fwd_tile_cost(136, 128, true, 64), 0.62 * 0.648438 / 0.742188 + 136.0 / 168 * 3.5 / 64, 1e-5);
  // 256 columns: twice the products, at 16 bytes a cycle less shared memory (rows_as_n_slice_work:
  // 1.320 at 168 rows, 1.242 at 152), and kRowsAsNWideFold times the fold.
  EXPECT_NEAR(fwd_tile_cost(168, 256, true, 64), 0.62 * 1.320313 / 0.742188 + 3.0 * 3.5 / 64, 1e-5);
  EXPECT_NEAR(fwd_tile_cost(152, 256, true, 64), 0.62 * 1.242188 / 0.742188 + 152.0 / 168 * 3.0 * 3.5 / 64, 1e-5);
  VocabSplit plan;
  plan.splits = 4;
  plan.row_tiles = 1;
  plan.vocab_tiles = 8;
  plan.whole_units = 4;
  plan.tile_cols = 256;
  EXPECT_EQ(fwd_plan_busiest_blocks(plan, 132), 1);
  EXPECT_NEAR(fwd_plan_time(plan, 132, 64), 2.0, 1e-12);
  plan.tile_cols = 128;
  plan.tile_rows = 168;
  plan.rows_as_n = true;
  EXPECT_NEAR(fwd_plan_time(plan, 132, 64), 2 * 0.6746875 + 0.20, 1e-12);
  plan.tile_rows = 136;  // a block end of fewer rows to merge
  EXPECT_NEAR(fwd_plan_time(plan, 132, 64), 2 * fwd_tile_cost(136, 128, true, 64) + 0.20 * 136 / 168, 1e-12);
  plan.tile_rows = 168;
  // Two waves of whole units (264 of 330), then one of pieces (66 units cut in two): three blocks
  // on the busiest multiprocessor, of 16, 16 and 8 tiles.
  plan.splits = 110;
  plan.row_tiles = 3;
  plan.vocab_tiles = 110 * 16;
  plan.whole_units = 264;
  plan.unit_pieces = 2;
  EXPECT_EQ(fwd_plan_busiest_tiles(plan, 132), 40);
  EXPECT_EQ(fwd_plan_busiest_blocks(plan, 132), 3);
  EXPECT_NEAR(fwd_plan_time(plan, 132, 64), 40 * 0.6746875 + 3 * 0.20, 1e-12);
}

// Behind kept chunks the forward starts at a tile boundary of its own width: a tile that does not
// divide the kept columns is left out.
TEST(OtherTiles, OnlyThoseWhoseWidthDividesTheKeptColumns) {
  const std::int64_t valid = 16032 + 256;
  EXPECT_EQ(choose_fwd_plan(333, 8192 * 2, valid - 256, kWide, kOthers, kH200, 256).tile_cols, 128);
  EXPECT_EQ(choose_fwd_plan(333, 8192 * 2, valid - 768, kWide, kOthers, kH200, 768).tile_cols, 192);
}

// Whole-unit waves a split's tiles long, then the cut units' pieces in waves a piece long.
TEST(OtherTiles, TheBusiestMultiprocessorRunsTheWholeWavesThenThePieceWaves) {
  VocabSplit plan;
  plan.splits = 8;
  plan.row_tiles = 128;  // 1024 units: 7.76 waves on 132 multiprocessors
  plan.vocab_tiles = 501;
  plan.whole_units = plan.units();
  EXPECT_EQ(fwd_plan_busiest_tiles(plan, 132), 8 * 63);
  // Cut: 792 whole units (six waves of 63 tiles), then 232 units in 8 pieces of 8 tiles (1856
  // blocks, 15 waves).
  const VocabSplit cut = cut_last_waves(plan, 132);
  ASSERT_EQ(cut.whole_units, 792);
  ASSERT_EQ(cut.unit_pieces, 8);
  EXPECT_EQ(fwd_plan_busiest_tiles(cut, 132), 6 * 63 + 15 * 8);
}

// The tiles of the rows as N take the most stages their kernel's shared memory holds, at every
// height: their slices take the tensor cores less time than the 128 x 256 tiles', so more of them
// in flight cover the loads' latency (docs/perf-notes.md, "Forward tiles per call").
TEST(OtherTiles, TheRowsAsNTakeTheMostStagesThatFit) {
  const unsigned limit = smem_limit_for_arch("sm_90a");
  for (const DType dtype : {DType::kBF16, DType::kFP16}) {
    int rows_as_n = 0;
    for (const FwdTile& tile : hopper_other_fwd_tiles(dtype, "sm_90a", true)) {
      if (!tile.rows_as_n) continue;
      ++rows_as_n;
      EXPECT_LE(linear_logp_fwd_smem(dtype, tile), limit) << fwd_tile_name(tile);
      FwdTile deeper = tile;
      ++deeper.stages;
      EXPECT_GT(linear_logp_fwd_smem(dtype, deeper), limit) << fwd_tile_name(tile) << " leaves room for a stage";
    }
    EXPECT_EQ(rows_as_n, 6);
  }
}

TEST(OtherTiles, OnlyASingleGpuOpOnTheDefaultHopperTileLoadsThem) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 128256;
  const LinearLogpLayout layout = resolve_layout(c);
  const LinearLogpKernels hopper = linear_logp_kernels(layout, "sm_90a");
  ASSERT_EQ(hopper.other_fwd.size(), 8u);
  for (const OtherFwdSpec& other : hopper.other_fwd) {
    EXPECT_EQ(other.spec.template_name(),
              other.tile.rows_as_n ? "linear_logp_fwd_rows_as_n" : "linear_logp_fwd_hopper");
    EXPECT_EQ(other.spec.int_param("BM"), other.tile.bm);
    EXPECT_EQ(other.spec.int_param("BN"), other.tile.bn);
  }
  EXPECT_EQ(hopper.other_fwd[0].tile, (FwdTile{128, 128, 64, 4, true}));
  EXPECT_EQ(hopper.other_fwd[1].tile, (FwdTile{128, 192, 64, 4, true}));
  EXPECT_EQ(hopper.other_fwd[2].tile, (FwdTile{136, 128, 64, 6, true, true}));
  EXPECT_EQ(hopper.other_fwd[3].tile, (FwdTile{152, 128, 64, 6, true, true}));
  EXPECT_EQ(hopper.other_fwd[4].tile, (FwdTile{168, 128, 64, 6, true, true}));
  EXPECT_EQ(hopper.other_fwd[5].tile, (FwdTile{136, 256, 64, 4, true, true}));
  EXPECT_EQ(hopper.other_fwd[7].tile, (FwdTile{168, 256, 64, 4, true, true}));
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_80").other_fwd.empty()) << "the portable loop";
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 2).other_fwd.empty()) << "tensor parallelism";
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 1, false).other_fwd.empty()) << "Hopper loop off";
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 1, true, FwdTile{128, 256, 64, 3, true}).other_fwd.empty())
      << "a tile a record chose";
}

// The keeping forwards (fwd_column_keep.cuh) are kernels apart, one a tile of the rows as N of 128
// columns the op runs, loaded by single-GPU ops that keep their backward's chunks and by no other.
// The 256-column tiles of the rows as N (other_fwd[5..7]) have none, nor, in an op with entropy, the
// 168-row tile, whose keeping kernel spills (fwd_tile_keeps).
TEST(OtherTiles, AnOpThatKeepsChunksLoadsAKeepingForwardForEachTileOfTheRowsAsNOf128Columns) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 128256;
  c.want_backward = true;
  const LinearLogpLayout layout = resolve_layout(c);
  const LinearLogpKernels hopper = linear_logp_kernels(layout, "sm_90a");
  ASSERT_EQ(hopper.keeping_fwd.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const OtherFwdSpec& keeping = hopper.keeping_fwd[i];
    EXPECT_EQ(keeping.tile, hopper.other_fwd[2 + i].tile);
    EXPECT_EQ(keeping.spec.template_name(), "linear_logp_fwd_rows_as_n");
    EXPECT_TRUE(keeping.spec.bool_param("KEEP"));
    EXPECT_FALSE(hopper.other_fwd[2 + i].spec.bool_param("KEEP")) << "the forwards that keep nothing";
    EXPECT_EQ(keeping.spec.int_param("BN"), 128);
  }
  for (std::size_t i = 5; i < 8; ++i) {
    const FwdTile& wide = hopper.other_fwd[i].tile;
    ASSERT_EQ(wide.bn, 256);
    EXPECT_FALSE(fwd_tile_keeps(wide, false)) << wide.bm;
    EXPECT_FALSE(hopper.other_fwd[i].spec.bool_param("KEEP")) << wide.bm;
    EXPECT_THROW(linear_logp_fwd_spec(layout, wide, true), Error) << wide.bm;
  }
  c.want_entropy = true;
  const LinearLogpKernels with_entropy = linear_logp_kernels(resolve_layout(c), "sm_90a");
  ASSERT_EQ(with_entropy.keeping_fwd.size(), 2u);
  EXPECT_EQ(with_entropy.keeping_fwd[0].tile.bm, 136);
  EXPECT_EQ(with_entropy.keeping_fwd[1].tile.bm, 152);
  const FwdTile rows168{168, 128, 64, fwd_rows_as_n_stages(128), true, true};
  EXPECT_TRUE(fwd_tile_keeps(rows168, false));
  EXPECT_FALSE(fwd_tile_keeps(rows168, true));
  EXPECT_THROW(linear_logp_fwd_spec(resolve_layout(c), rows168, true), Error) << "168 rows with entropy";
  c.want_entropy = false;
  // A tile a record or SHARDJIT_FWD_TILE chose: its own keeping forward where it is of the rows as N.
  const FwdTile rows_as_n{152, 128, 64, fwd_rows_as_n_stages(128), true, true};
  const LinearLogpKernels pinned = linear_logp_kernels(layout, "sm_90a", 1, true, rows_as_n);
  ASSERT_EQ(pinned.keeping_fwd.size(), 1u);
  EXPECT_EQ(pinned.keeping_fwd[0].tile, rows_as_n);
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 1, true, FwdTile{128, 256, 64, 4, true}).keeping_fwd.empty());
  const FwdTile wide_rows_as_n{152, 256, 64, fwd_rows_as_n_stages(256), true, true};
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 1, true, wide_rows_as_n).keeping_fwd.empty())
      << "a pinned 256-column tile of the rows as N keeps nothing in the forward";
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_90a", 2).keeping_fwd.empty()) << "tensor parallelism";
  EXPECT_TRUE(linear_logp_kernels(layout, "sm_80").keeping_fwd.empty()) << "the portable loop";
  LinearLogpConfig forward_only = c;
  forward_only.want_backward = false;
  EXPECT_TRUE(linear_logp_kernels(resolve_layout(forward_only), "sm_90a").keeping_fwd.empty()) << "no backward";
  LinearLogpConfig dz_fp32 = c;
  dz_fp32.dz_fp32 = true;
  EXPECT_TRUE(linear_logp_kernels(resolve_layout(dz_fp32), "sm_90a").keeping_fwd.empty()) << "fp32 dZ keeps nothing";
  EXPECT_THROW(linear_logp_fwd_spec(layout, FwdTile{128, 256, 64, 4, true}, true), Error);
}

TEST(LinearLogpKernels, OneForwardAndOneCombine) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 128256;
  LinearLogpKernels kernels = linear_logp_kernels(resolve_layout(c), "sm_80");
  EXPECT_EQ(kernels.fwd.template_name(), "linear_logp_fwd");
  EXPECT_EQ(kernels.fwd.int_param("H"), 4096);
  EXPECT_EQ(kernels.fwd.int_param("V_VALID"), 128256);
  EXPECT_EQ(linear_logp_kernels(resolve_layout(c), "sm_90a").fwd.template_name(), "linear_logp_fwd_hopper");
  EXPECT_EQ(kernels.combine.template_name(), "logp_combine");
  EXPECT_EQ(kernels.combine.int_param("PEERS"), 0);
  EXPECT_FALSE(kernels.peer_combine.has_value());
}

// The forward's arguments carry what the Hopper kernel takes at run time, H and the shard's valid
// columns (here a TP shard past the padding's start), beside the split and the call.
TEST(FwdArgs, CarryTheShapeAndTheSplit) {
  LinearLogpConfig c = LinearLogpConfig{};
  c.hidden = 2880;
  c.vocab_local = 160;
  c.vocab_start = 160;
  c.vocab_global = 320;
  c.valid_vocab = 250;
  c.temperature = 2.0f;
  const LinearLogpLayout layout = resolve_layout(c);
  VocabSplit plan;
  plan.splits = 2;
  plan.group_rows = 66;
  plan.row_tiles = 3;
  plan.vocab_tiles = 1;
  plan.whole_units = plan.units();
  const kernels::LinearLogpFwdArgs args = linear_logp_fwd_args(layout, LinearLogpInputs{}, 300, 2880, 2944, nullptr, plan);
  EXPECT_EQ(args.hidden_size, 2880);
  EXPECT_EQ(args.valid_local, 90);
  EXPECT_EQ(args.n_rows, 300);
  EXPECT_EQ(args.weight_stride, 2944);
  EXPECT_EQ(args.vocab_start, 160);
  EXPECT_EQ(args.splits, 2);
  EXPECT_EQ(args.row_tiles, 3);
  EXPECT_EQ(args.whole_units, 6);
  EXPECT_EQ(args.first_tile, 0);
  EXPECT_FLOAT_EQ(args.inv_temperature, 0.5f);
}

// The wgmma main loop exists on sm_90a alone, for 16-bit inputs, and can be turned off; the
// forward and the dZ kernel always run the same one (on the Hopper loop both are templates of
// their own, with no shape among their parameters).
TEST(LinearLogpKernels, TheHopperMainLoopOnlyOnSm90aFor16BitInputs) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 128256;
  c.want_backward = true;
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    c.dtype = dtype;
    const LinearLogpLayout layout = resolve_layout(c);
    for (const char* arch : {"sm_80", "sm_90", "sm_90a", "sm_100a"}) {
      for (bool hopper_path : {true, false}) {
        const LinearLogpKernels k = linear_logp_kernels(layout, arch, 1, hopper_path);
        const bool expected = hopper_path && std::string(arch) == "sm_90a" && dtype != DType::kFP32;
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + arch + (hopper_path ? " hopper on" : " hopper off"));
        EXPECT_EQ(k.fwd.template_name(), expected ? "linear_logp_fwd_hopper" : "linear_logp_fwd");
        EXPECT_EQ(k.backward->dz.template_name(), expected ? "linear_logp_bwd_dz_hopper" : "linear_logp_bwd_dz");
        if (expected) {
          EXPECT_EQ(k.fwd.int_param("BM"), 128);
          EXPECT_EQ(k.fwd.int_param("BN"), 256);
          EXPECT_EQ(k.fwd.int_param("BK"), 64);
          // The Hopper epilogues work in registers, so the rings take a fourth stage (and keep
          // a slice of wgmma in flight), in the forward and in the dZ kernel.
          EXPECT_EQ(k.fwd.int_param("STAGES"), 4);
          EXPECT_EQ(k.backward->dz.int_param("STAGES"), 4);
          const FwdTile tile = default_fwd_tile(dtype, arch, hopper_path);
          EXPECT_EQ(linear_logp_fwd_smem(dtype, tile), 4u * (128 + 256) * 64 * 2 + 4u * 16) << "the TMA ring and its mbarriers";
          EXPECT_LE(linear_logp_fwd_smem(dtype, tile), smem_limit_for_arch(arch));
        }
      }
    }
  }
}

TEST(PrewarmPlan, EvenShardsCoverTheVocabulary) {
  auto shards = even_shards(128256, 8);
  ASSERT_EQ(shards.size(), 8u);
  std::int64_t next = 0;
  for (const auto& s : shards) {
    EXPECT_EQ(s.start, next);
    next += s.size;
  }
  EXPECT_EQ(next, 128256);
  auto uneven = even_shards(151937, 2);
  EXPECT_EQ(uneven[0].size, 75969);
  EXPECT_EQ(uneven[1].size, 75968);
  // Every rank gets rows or the split is refused: 9 over 4 would be 3, 3, 3 and none.
  EXPECT_EQ(even_shards(10, 4).size(), 4u);  // 3, 3, 3, 1
  try {
    even_shards(9, 4);
    ADD_FAILURE() << "a split that leaves a rank no rows was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("cannot be split evenly over 4 ranks"), std::string::npos) << error.what();
  }
}

TEST(PrewarmPlan, DeduplicatesSharedKernels) {
  PrewarmRequest request;
  request.models = {{"m", 64, 300, 0}};
  request.tp = {1, 2};
  request.archs = {"sm_80"};
  auto items = prewarm_items(request);
  // tp=1: one fwd (V=300) and the combine; tp=2: one fwd (two even shards of 150 share it), the
  // same combine (any number of sources) and its peer-path variant.
  EXPECT_EQ(items.size(), 2u + 1u + 1u);
}

// Prewarm builds the loop the ops will run: the request carries RuntimeConfig::hopper_path.
TEST(PrewarmPlan, BuildsTheMainLoopOfTheHopperSwitch) {
  for (bool hopper_path : {true, false}) {
    PrewarmRequest request;
    request.models = {{"m", 64, 300, 0}};
    request.archs = {"sm_90a"};
    request.backward = true;
    request.hopper_path = hopper_path;
    std::set<std::string> forwards;
    std::set<std::string> dz_kernels;
    for (const PrewarmItem& item : prewarm_items(request)) {
      const std::string& name = item.spec.template_name();
      if (name.rfind("linear_logp_bwd_dz", 0) == 0) dz_kernels.insert(name);
      if (name.rfind("linear_logp_fwd", 0) == 0 && name != "linear_logp_fwd_keep") forwards.insert(name);
    }
    const std::set<std::string> expected =
        hopper_path ? std::set<std::string>{"linear_logp_fwd_hopper", "linear_logp_fwd_rows_as_n"}
                    : std::set<std::string>{"linear_logp_fwd"};
    EXPECT_EQ(forwards, expected);
    EXPECT_EQ(dz_kernels, std::set<std::string>{hopper_path ? "linear_logp_bwd_dz_hopper" : "linear_logp_bwd_dz"});
  }
}

// `prewarm --tune` times each single-GPU forward shape's tile, also where one kernel serves several
// shapes (the Hopper loop's forward): the item keeps every shape's op, once each, whichever asked
// first (here a TP rank, whose forward is the same kernel but not tuned).
TEST(PrewarmPlan, EveryForwardShapeStaysTunable) {
  PrewarmRequest request;
  request.models = {{"a", 64, 300, 0}, {"b", 128, 1000, 0}};
  request.archs = {"sm_90a", "sm_80"};
  request.tp = {2, 1};
  request.backward = true;  // backward variants: the same forward, tuned once
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> shapes;  // arch -> (H, V_local)
  for (const PrewarmItem& item : prewarm_items(request)) {
    for (const TunableForward& tunable : item.tunables) {
      EXPECT_EQ(tunable.config.vocab_start, 0) << "single-GPU ops only";
      shapes[item.arch].emplace_back(tunable.config.hidden, tunable.config.vocab_local);
    }
  }
  const std::vector<std::pair<std::int64_t, std::int64_t>> both = {{64, 300}, {128, 1000}};
  EXPECT_EQ(shapes["sm_90a"], both) << "one kernel, two shapes";
  EXPECT_EQ(shapes["sm_80"], both) << "one kernel a shape";
}

// `prewarm --tune --max-rows`: one tunable op a tuning record, for each max_rows asked for, those
// that share a record (the same power of two of rows: 300 and 500, 3000 and 4096) once.
TEST(PrewarmPlan, TunesOnceForEachMaxRowsRecord) {
  PrewarmRequest request;
  request.models = {{"m", 64, 300, 0}};
  request.archs = {"sm_90a"};
  request.tune_max_rows = {300, 500, 3000, 4096, 20000};
  std::vector<std::int64_t> tuned;
  for (const PrewarmItem& item : prewarm_items(request)) {
    for (const TunableForward& tunable : item.tunables) {
      tuned.push_back(tunable.config.max_rows);
      EXPECT_NE(tunable.origin.find("max_rows=" + std::to_string(tunable.config.max_rows)), std::string::npos)
          << tunable.origin;
    }
  }
  EXPECT_EQ(tuned, (std::vector<std::int64_t>{300, 3000, 20000}));
  request.tune_max_rows = {0};
  std::size_t default_tunables = 0;
  for (const PrewarmItem& item : prewarm_items(request)) default_tunables += item.tunables.size();
  EXPECT_EQ(default_tunables, 1u) << "without --max-rows: the 4096-row record of ops built without max_rows";
}

// Ops built with dz_fp32 or gradient filtering load other dZ and GEMM kernels: prewarm builds
// them when asked (--dz-fp32, --grad-filter), so that such ops start cache-only too.
TEST(PrewarmPlan, BuildsTheDzVariantsAskedFor) {
  PrewarmRequest request;
  request.models = {{"m", 64, 300, 0}};
  request.archs = {"sm_90a"};
  request.backward = true;
  std::set<std::string> plain;
  for (const PrewarmItem& item : prewarm_items(request)) plain.insert(item.spec.canonical_text());
  request.dz_fp32 = true;
  request.grad_filter = true;
  std::set<std::string> all;
  for (const PrewarmItem& item : prewarm_items(request)) all.insert(item.spec.canonical_text());
  for (bool dz_fp32 : {false, true}) {
    for (float threshold : {0.0f, 1e-3f}) {
      LinearLogpConfig config;
      config.hidden = 64;
      config.vocab_local = 300;
      config.want_backward = true;
      config.dz_fp32 = dz_fp32;
      config.grad_filter_threshold = threshold;
      const LinearLogpKernels kernels = linear_logp_kernels(resolve_layout(config), "sm_90a");
      ASSERT_TRUE(kernels.backward.has_value());
      const bool variant = dz_fp32 || threshold > 0.0f;
      for (const KernelSpec& spec : kernels.backward->all()) {
        EXPECT_EQ(all.count(spec.canonical_text()), 1u) << spec.canonical_text();
        if (variant && spec.template_name().rfind("linear_logp_bwd_dz", 0) == 0) {
          EXPECT_EQ(plain.count(spec.canonical_text()), 0u) << "a variant's dZ kernel without asking: "
                                                            << spec.canonical_text();
        }
      }
    }
  }
}

TEST(PrewarmPlan, RejectsEmptyRequests) {
  PrewarmRequest request;
  request.archs = {"sm_80"};
  EXPECT_THROW(prewarm_items(request), Error);
  request.models = {{"m", 64, 300, 0}};
  request.archs.clear();
  EXPECT_THROW(prewarm_items(request), Error);
  request.archs = {"sm_80"};
  request.tp = {0};
  EXPECT_THROW(prewarm_items(request), Error);
}

}  // namespace
}  // namespace shardjit
