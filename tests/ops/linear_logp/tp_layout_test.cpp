// The layout check of a tensor-parallel LinearLogp, as the pure function every rank runs over
// the same gathered records: a bad layout gives the same message on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/ops/linear_logp/tp/layout.hpp"
#include "runtime/prewarm/plan.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

LinearLogpConfig shard(std::int64_t start, std::int64_t size, std::int64_t global) {
  LinearLogpConfig c;
  c.hidden = 4096;
  c.vocab_start = start;
  c.vocab_local = size;
  c.vocab_global = global;
  return c;
}

// The records of the ranks holding `configs`, with plausible GPU fields.
std::vector<TpLayoutRecord> records_of(const std::vector<LinearLogpConfig>& configs) {
  std::vector<TpLayoutRecord> records;
  for (std::size_t r = 0; r < configs.size(); ++r) {
    TpLayoutRecord record = make_tp_layout_record(configs[r], static_cast<int>(r), static_cast<int>(configs.size()));
    record.sm_count = 132;
    record.l2_bytes = 60ll << 20;
    record.tile_bm = 128;
    record.tile_bn = 256;
    records.push_back(record);
  }
  return records;
}

// Checks the records as every rank would; expects all to fail with one message containing
// `needle`, and returns it.
std::string expect_rejected_everywhere(const std::vector<TpLayoutRecord>& records, const std::string& needle) {
  std::string first;
  for (int rank = 0; rank < static_cast<int>(records.size()); ++rank) {
    try {
      check_tp_layout(records, rank);
      ADD_FAILURE() << "rank " << rank << " accepted a layout that should fail with '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string message = e.what();
      EXPECT_NE(message.find(needle), std::string::npos) << message;
      if (rank == 0) first = message;
      EXPECT_EQ(message, first) << "rank " << rank << " must raise rank 0's message";
    }
  }
  return first;
}

TEST(TpLayout, EvenShardsAreAccepted) {
  const TpLayout layout = check_tp_layout(records_of({shard(0, 64128, 128256), shard(64128, 64128, 128256)}), 1);
  EXPECT_EQ(layout.tp, 2);
  EXPECT_EQ(layout.rank, 1);
  ASSERT_EQ(layout.shards.size(), 2u);
  EXPECT_EQ(layout.shards[1].start, 64128);
  EXPECT_EQ(layout.max_valid_local, 64128);
  EXPECT_EQ(layout.gpu.sm_count, 132);
  EXPECT_EQ(layout.split_tile.bn, 256);
}

TEST(TpLayout, UnevenShardsAndPaddingAreAccepted) {
  std::vector<LinearLogpConfig> configs = {shard(0, 100, 1024), shard(100, 500, 1024), shard(600, 424, 1024)};
  for (auto& c : configs) c.valid_vocab = 1000;
  std::vector<TpLayoutRecord> records = records_of(configs);
  records[2].sm_count = 100;  // the smallest GPU steers the split choice
  const TpLayout layout = check_tp_layout(records, 2);
  EXPECT_EQ(layout.shards[2].valid, 400);
  EXPECT_EQ(layout.max_valid_local, 500);
  EXPECT_EQ(layout.gpu.sm_count, 100);
}

TEST(TpLayout, RecordsResolveTheDefaults) {
  LinearLogpConfig c = shard(0, 300, 0);
  const TpLayoutRecord record = make_tp_layout_record(c, 0, 1);
  EXPECT_EQ(record.vocab_global, 300);
  EXPECT_EQ(record.valid_vocab, 300);
  EXPECT_EQ(record.bias_dtype, -1);
  EXPECT_EQ(record.magic, kTpLayoutMagic);
}

TEST(TpLayout, AGapIsNamed) {
  const std::string message = expect_rejected_everywhere(
      records_of({shard(0, 64000, 128256), shard(64128, 64128, 128256)}), "ids [64000, 64128) are on no rank");
  EXPECT_NE(message.find("rank 0 [0, 64000), rank 1 [64128, 128256)"), std::string::npos) << message;
}

TEST(TpLayout, AnOverlapIsNamed) {
  expect_rejected_everywhere(records_of({shard(0, 64200, 128256), shard(64128, 64128, 128256)}),
                             "rank 1's shard [64128, 128256) overlaps the shards before it, which end at 64200");
}

TEST(TpLayout, ShardsOutOfRankOrderAreRefused) {
  expect_rejected_everywhere(records_of({shard(64128, 64128, 128256), shard(0, 64128, 128256)}),
                             "ids [0, 64128) are on no rank");
}

TEST(TpLayout, AMissingTailIsNamed) {
  expect_rejected_everywhere(records_of({shard(0, 64128, 128256), shard(64128, 64000, 128256)}),
                             "ids [128128, 128256) are on no rank");
}

TEST(TpLayout, FieldsThatMustAgreeAreNamedWithEveryRanksValue) {
  struct Case {
    const char* needle;
    void (*change)(LinearLogpConfig&);
  };
  const Case cases[] = {
      {"hidden differs across ranks (rank 0: 4096, rank 1: 2048)", [](LinearLogpConfig& c) { c.hidden = 2048; }},
      {"dtype differs across ranks (rank 0: bf16, rank 1: fp16)", [](LinearLogpConfig& c) { c.dtype = DType::kFP16; }},
      {"valid_vocab differs across ranks (rank 0: 128256, rank 1: 128000)",
       [](LinearLogpConfig& c) { c.valid_vocab = 128000; }},
      {"target_dtype differs", [](LinearLogpConfig& c) { c.target_dtype = DType::kInt32; }},
      {"bias_dtype differs across ranks (rank 0: none, rank 1: bf16)",
       [](LinearLogpConfig& c) { c.bias_dtype = DType::kBF16; }},
      {"ignore_index differs", [](LinearLogpConfig& c) { c.ignore_index = -1; }},
      {"temperature differs", [](LinearLogpConfig& c) { c.temperature = 1.0000001f; }},
      {"want_entropy differs", [](LinearLogpConfig& c) { c.want_entropy = true; }},
      {"want_backward differs", [](LinearLogpConfig& c) { c.want_backward = true; }},
  };
  for (const Case& test : cases) {
    std::vector<LinearLogpConfig> configs = {shard(0, 64128, 128256), shard(64128, 64128, 128256)};
    test.change(configs[1]);
    expect_rejected_everywhere(records_of(configs), test.needle);
  }
}

// Ranks whose GPUs pick different forward tiles would each walk other row tiles of the plan.
TEST(TpLayout, ForwardTilesThatDifferAreNamed) {
  std::vector<TpLayoutRecord> records = records_of({shard(0, 64128, 128256), shard(64128, 64128, 128256)});
  records[1].tile_bm = 64;
  records[1].tile_bn = 128;
  expect_rejected_everywhere(records, "differs across ranks (rank 0: 128x256, rank 1: 64x128)");
}

TEST(TpLayout, ARankThatRejectedItsOwnConfigIsReportedEverywhere) {
  std::vector<TpLayoutRecord> records = records_of({shard(0, 64128, 128256), shard(64128, 64128, 128256)});
  set_tp_layout_error(records[1], "LinearLogp config: hidden = 100 is not supported");
  expect_rejected_everywhere(records, "rank 1: LinearLogp config: hidden = 100 is not supported");
}

TEST(TpLayout, LongLocalErrorsAreCutNotOverrun) {
  std::vector<TpLayoutRecord> records = records_of({shard(0, 10, 20), shard(10, 10, 20)});
  set_tp_layout_error(records[0], std::string(5000, 'x'));
  const std::string message = expect_rejected_everywhere(records, "rank 0: xxx");
  EXPECT_LT(message.size(), kTpLayoutErrorBytes + 200);
}

TEST(TpLayout, AnotherBuildsRecordIsRefused) {
  std::vector<TpLayoutRecord> records = records_of({shard(0, 10, 20), shard(10, 10, 20)});
  records[1].version = kTpLayoutVersion + 1;
  expect_rejected_everywhere(records, "rank 1 sent a layout record of another shardjit version");
}

TEST(TpLayout, AShardWhollyInThePaddingIsAccepted) {
  std::vector<LinearLogpConfig> configs = {shard(0, 1000, 1024), shard(1000, 24, 1024)};
  for (auto& c : configs) c.valid_vocab = 1000;
  const TpLayout layout = check_tp_layout(records_of(configs), 1);
  EXPECT_EQ(layout.shards[1].valid, 0) << "its partials are empty";
  EXPECT_EQ(layout.max_valid_local, 1000);
}

// One combine kernel merges any number of partials (tp x splits, an argument); a TP op of up
// to kMaxPeers ranks also loads its peer variant.
TEST(TpKernels, OneCombineKernelAndItsPeerVariant) {
  LinearLogpConfig c = shard(0, 64128, 128256);
  const LinearLogpLayout layout = resolve_layout(c);
  const LinearLogpKernels two = linear_logp_kernels(layout, "sm_90a", 2);
  EXPECT_EQ(two.combine.int_param("PEERS"), 0);
  ASSERT_TRUE(two.peer_combine.has_value());
  EXPECT_EQ(two.peer_combine->int_param("PEERS"), 2);
  EXPECT_FALSE(linear_logp_kernels(layout, "sm_90a", 16).peer_combine.has_value()) << "more ranks than kMaxPeers";
  EXPECT_FALSE(linear_logp_kernels(layout, "sm_90a").peer_combine.has_value()) << "single GPU";
}

TEST(TpKernels, PrewarmBuildsTheCombineKernelsOfEachTpDegree) {
  PrewarmRequest request;
  request.models = {{"test", 4096, 128256, 0}};
  request.tp = {2};
  request.archs = {"sm_90a"};
  std::vector<std::int64_t> peers;
  for (const PrewarmItem& item : prewarm_items(request)) {
    if (item.spec.template_name() == "logp_combine") peers.push_back(item.spec.int_param("PEERS"));
  }
  std::sort(peers.begin(), peers.end());
  EXPECT_EQ(peers, (std::vector<std::int64_t>{0, 2}));
}

}  // namespace
}  // namespace shardjit
