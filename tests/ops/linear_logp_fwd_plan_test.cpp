// How the forward is laid out on the GPU: vocabulary splits and the kernels an op loads.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "common/tile_order.cuh"
#include "runtime/ops/linear_logp_kernels.hpp"
#include "runtime/ops/prewarm_plan.hpp"
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
  FwdSchedule plan = choose_vocab_splits(2048, 4096, 128256, FwdTile{}, kH200);  // X: 8 MiB
  EXPECT_LE(plan.splits, 8);
  EXPECT_GE(plan.splits * 16, 100) << "16 row tiles still need splits to fill 132 SMs";
}

TEST(VocabSplits, LargeBatchesSplitSoTheRunningRowTilesFitInL2) {
  // X is 128 MiB at 16k rows x 4096 bf16: with one split all 128 row tiles would run at once.
  FwdSchedule plan = choose_vocab_splits(16384, 8192, 128256, FwdTile{}, kH200);
  EXPECT_LE(static_cast<std::int64_t>(plan.group_rows) * 128 * 8192, 30ll << 20);
}

// A group of the block order is the row tiles one wave of blocks holds.
TEST(VocabSplits, GroupRowsAreTheRowTilesOfOneWave) {
  EXPECT_EQ(choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).splits, 8);
  EXPECT_EQ(choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).group_rows, 17);
  EXPECT_EQ(choose_vocab_splits(1, 8192, 128256, FwdTile{128, 256, 64, 4}, kH200).group_rows,
            (132 + 127) / 128);
  EXPECT_GE(choose_vocab_splits(1, 8192, 128256, FwdTile{}, GpuShape{0, 0}).group_rows, 1)
      << "never zero, whatever the device reports";
}

TEST(VocabSplits, EfficiencyCountsTheWavesOfTheLongestSplit) {
  EXPECT_DOUBLE_EQ(fwd_split_efficiency(128, 501, 8, 132), 128.0 * 501 / (8 * 132 * 63));
  EXPECT_DOUBLE_EQ(fwd_split_efficiency(2, 501, 64, 132), 2.0 * 501 / (132 * 8));
}

TEST(VocabSplits, SmallBatchesSplitTheVocabularyToFillTheGpu) {
  FwdSchedule plan = choose_vocab_splits(256, 8192, 128256, FwdTile{}, kH200);
  EXPECT_GE(plan.splits * 2, 100) << "two row tiles need many splits to fill 132 SMs";
  EXPECT_LE(plan.splits * 2, 132) << "one wave";
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
      const FwdSchedule plan = choose_vocab_splits(n, 8192, vocab, FwdTile{}, kH200);
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

TEST(VocabSplits, AreAlwaysOneOfTheChoicesAndAtMostTheCap) {
  for (std::int64_t n : {1, 7, 100, 129, 1000, 4096, 100000}) {
    const FwdSchedule plan = choose_vocab_splits(n, 8192, 151936, FwdTile{}, kH200);
    EXPECT_NE(std::find(kVocabSplitChoices.begin(), kVocabSplitChoices.end(), plan.splits), kVocabSplitChoices.end());
    EXPECT_LE(choose_vocab_splits(n, 8192, 151936, FwdTile{}, kH200, 0.02, 16).splits, 16);
  }
}

TEST(VocabSplits, PartialRowsBoundEveryCallUpToTheRows) {
  const FwdTile tile{128, 256, 64, 3};
  auto sources_for = [&](std::int64_t rows) {
    return cut_last_wave(choose_vocab_splits(rows, 8192, 128256, tile, kH200), kH200.sm_count).sources();
  };
  const std::int64_t bound = max_partial_rows(16384, tile.bm, sources_for);
  std::int64_t most = 0;
  for (std::int64_t n = 1; n <= 16384; ++n) most = std::max(most, n * sources_for(n));
  EXPECT_EQ(bound, most);
}

// Every (row tile, vocabulary tile) of the shard is computed by exactly one piece, and every
// partial source of every row tile is written by exactly one piece, whatever the cut.
void expect_schedule_covers_once(const FwdSchedule& s) {
  SCOPED_TRACE(std::to_string(s.row_tiles) + " row tiles x " + std::to_string(s.vocab_tiles) + " tiles, " +
               std::to_string(s.splits) + " splits, " + std::to_string(s.tail_parts) + " parts");
  std::vector<int> tiles(static_cast<std::size_t>(s.row_tiles) * s.vocab_tiles, 0);
  std::vector<int> sources(static_cast<std::size_t>(s.row_tiles) * s.sources(), 0);
  for (int block = 0; block < s.blocks(); ++block) {
    const int pieces = kernels::fwd_block_pieces(s, block);
    ASSERT_GE(pieces, 1) << "block " << block << " has nothing to do";
    for (int i = 0; i < pieces; ++i) {
      const kernels::FwdPiece p = kernels::fwd_block_piece(s, block, i);
      ASSERT_TRUE(p.row_tile >= 0 && p.row_tile < s.row_tiles) << block;
      ASSERT_TRUE(p.source >= 0 && p.source < s.sources()) << block;
      ASSERT_TRUE(p.tile_begin >= 0 && p.tile_begin <= p.tile_end && p.tile_end <= s.vocab_tiles) << block;
      ++sources[static_cast<std::size_t>(p.source) * s.row_tiles + p.row_tile];
      for (int t = p.tile_begin; t < p.tile_end; ++t) ++tiles[static_cast<std::size_t>(p.row_tile) * s.vocab_tiles + t];
    }
  }
  EXPECT_EQ(std::count(tiles.begin(), tiles.end(), 1), static_cast<std::ptrdiff_t>(tiles.size()));
  EXPECT_EQ(std::count(sources.begin(), sources.end(), 1), static_cast<std::ptrdiff_t>(sources.size()));
}

TEST(FwdSchedule, EveryTileOnceAndEverySourceOnceWithOrWithoutACut) {
  for (std::int64_t n : {1, 129, 1000, 4096, 5500, 7500, 16384}) {
    for (std::int64_t vocab : {1, 300, 3001, 60000, 128256}) {
      for (const FwdTile& tile : {FwdTile{128, 256, 64, 4, true}, FwdTile{128, 128, 32, 3}}) {
        const FwdSchedule whole = choose_vocab_splits(n, 8192, vocab, tile, kH200);
        expect_schedule_covers_once(whole);
        expect_schedule_covers_once(cut_last_wave(whole, kH200.sm_count));
        expect_schedule_covers_once(cut_last_wave(whole, 100));
      }
    }
  }
}

// llama3-8b at 16k rows: 1024 units of 63 tiles are 7 waves of 132 and 100 units. Cut, the last
// wave's 132 blocks are the 100 leads and 32 blocks of parts, and it ends well before a whole
// unit's 63 tiles.
TEST(FwdSchedule, CutsTheLastWaveAt16kRows) {
  const FwdSchedule whole = choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4, true}, kH200);
  ASSERT_EQ(whole.units(), 1024);
  EXPECT_EQ(whole.tail_parts, 0) << "choose_vocab_splits runs every unit whole";
  const FwdSchedule cut = cut_last_wave(whole, 132);
  EXPECT_EQ(cut.splits, whole.splits);
  EXPECT_EQ(cut.whole_units, 924);
  EXPECT_EQ(cut.blocks(), 8 * 132);
  EXPECT_GE(cut.tail_parts, 1);
  EXPECT_EQ(cut.sources(), cut.splits * (1 + cut.tail_parts));
  EXPECT_LT(fwd_tail_tiles(cut), 0.85 * fwd_tail_tiles(whole));
  for (int block = cut.whole_units; block < cut.units(); ++block) {
    const kernels::FwdPiece lead = kernels::fwd_block_piece(cut, block, 0);
    EXPECT_EQ(lead.tile_begin % cut.split_tiles(), 0) << "a lead starts at its split's first tile";
  }
}

// The gpu tier's cut cases (tests/gpu/linear_logp_fwd_test.cpp) are cut on an H200's 132
// multiprocessors as their comment says.
TEST(FwdSchedule, TheGpuTestsCutCasesAreCut) {
  const FwdSchedule bf16 = cut_last_wave(
      choose_vocab_splits(5500, 64 * 2, 100000, FwdTile{128, 256, 64, 4, true}, kH200), kH200.sm_count);
  EXPECT_EQ(bf16.tail_parts, 4);
  EXPECT_GT(bf16.whole_units, 0);
  EXPECT_GT(bf16.cut_units() * bf16.tail_parts, bf16.part_blocks) << "part blocks take several parts";
  const FwdSchedule fp32 = cut_last_wave(
      choose_vocab_splits(7500, 64 * 4, 60000, default_fwd_tile(DType::kFP32, "sm_90a", true), kH200),
      kH200.sm_count);
  EXPECT_EQ(fp32.tail_parts, 2);
  EXPECT_GT(fp32.whole_units, 0);
}

TEST(FwdSchedule, WholeWavesAndCutsThatGainLessThanATileStayWhole) {
  FwdSchedule whole = choose_vocab_splits(16384, 8192, 128256, FwdTile{128, 256, 64, 4, true}, kH200);
  EXPECT_EQ(cut_last_wave(whole, 128).tail_parts, 0) << "1024 units are 8 whole waves of 128";
  whole = choose_vocab_splits(256, 8192, 128256, FwdTile{128, 256, 64, 4, true}, kH200);
  const FwdSchedule decode = cut_last_wave(whole, 132);
  EXPECT_EQ(decode.tail_parts, 0) << "two row tiles of a few tiles a split: parts would cost more than they save";
  EXPECT_EQ(decode.sources(), decode.splits);
  EXPECT_EQ(decode.blocks(), decode.units());
}

TEST(LinearLogpKernels, OneForwardAndOneCombine) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_local = 128256;
  LinearLogpKernels kernels = linear_logp_kernels(resolve_layout(c), "sm_90a");
  EXPECT_EQ(kernels.fwd.template_name(), "linear_logp_fwd");
  EXPECT_EQ(kernels.fwd.int_param("H"), 4096);
  EXPECT_EQ(kernels.combine.template_name(), "logp_combine");
  EXPECT_EQ(kernels.combine.int_param("PEERS"), 0);
  EXPECT_FALSE(kernels.peer_combine.has_value());
}

// The wgmma main loop exists on sm_90a alone, for 16-bit inputs, and can be turned off; the
// forward and the dZ kernel always run the same one.
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
        EXPECT_EQ(k.fwd.bool_param("WGMMA"), expected);
        EXPECT_EQ(k.backward->dz.bool_param("WGMMA"), expected);
        if (expected) {
          EXPECT_EQ(k.fwd.int_param("BM"), 128);
          EXPECT_EQ(k.fwd.int_param("BN"), 256);
          EXPECT_EQ(k.fwd.int_param("BK"), 64);
          // The Hopper epilogues work in registers, so the rings take a fourth stage (and keep
          // a slice of wgmma in flight), in the forward and in the dZ kernel.
          EXPECT_EQ(k.fwd.int_param("STAGES"), 4);
          EXPECT_EQ(k.backward->dz.int_param("STAGES"), 4);
          const FwdTile tile = default_fwd_tile(dtype, arch, hopper_path);
          EXPECT_EQ(linear_logp_fwd_smem(dtype, tile), 4u * (128 + 256) * 64 * 2) << "the ring alone";
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
    int logit_kernels = 0;
    for (const PrewarmItem& item : prewarm_items(request)) {
      const std::string& name = item.spec.template_name();
      if (name != "linear_logp_fwd" && name != "linear_logp_bwd_dz") continue;
      ++logit_kernels;
      EXPECT_EQ(item.spec.bool_param("WGMMA"), hopper_path) << item.spec.canonical_text();
    }
    EXPECT_GE(logit_kernels, 2);
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
