// The kept-chunk decisions (runtime/ops/linear_logp/keep.hpp): which ops keep, how many chunks a
// forward may keep by the chunks' shape, and which kept chunks a backward call may use.
#include <gtest/gtest.h>

#include "runtime/ops/linear_logp/keep.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// Chunks of `cols` columns over `vocab`, with or without room for a second kept chunk.
BackwardChunks chunks_of(std::int64_t cols, std::int64_t vocab, bool band) {
  BackwardChunks chunks;
  chunks.chunk_cols = cols;
  chunks.vocab_local = vocab;
  chunks.chunks = (vocab + cols - 1) / cols;
  chunks.dz_stride = cols;
  chunks.kept_band_rows = band ? 1024 : 0;
  return chunks;
}

TEST(OpKeepsChunks, OnlySingleGpuHopperSixteenBitUnfiltered) {
  LinearLogpConfig c;
  const FwdTile hopper{128, 256, 64, 4, true};
  const FwdTile portable{128, 256, 64, 3, false};
  EXPECT_TRUE(op_keeps_chunks(c, hopper, DType::kBF16, 1));
  EXPECT_FALSE(op_keeps_chunks(c, hopper, DType::kBF16, 2)) << "TP keeps nothing";
  EXPECT_FALSE(op_keeps_chunks(c, portable, DType::kBF16, 1));
  EXPECT_FALSE(op_keeps_chunks(c, hopper, DType::kFP32, 1)) << "fp32 dZ";
  c.grad_filter_threshold = 1e-6f;
  EXPECT_FALSE(op_keeps_chunks(c, hopper, DType::kBF16, 1)) << "the filter's mask";
}

TEST(KeepableChunks, FollowTheChunksShape) {
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 128256, true), 128256, 256, 2), 2);
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 128256, true), 128256, 256, 1), 1) << "the call's limit";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 128256, true), 128256, 256, 0), 0);
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 128256, false), 128256, 256, 2), 2) << "the second in the keep buffer";
  EXPECT_EQ(keepable_chunks(chunks_of(128256, 128256, true), 128256, 256, 2), 1) << "a single chunk: whole";
  EXPECT_EQ(keepable_chunks(chunks_of(128256, 128256, true), 100000, 256, 1), 1) << "padding and all";
  EXPECT_EQ(keepable_chunks(chunks_of(128256, 128256, true), 128256, 256, 0), 0) << "the call keeps none";
  EXPECT_EQ(keepable_chunks(chunks_of(8320, 128256, true), 128256, 256, 2), 0) << "not on a forward tile";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 20000, true), 8192, 256, 2), 0) << "past the valid columns";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 20000, true), 16000, 256, 2), 1) << "the second past them";
}

TEST(KeepableChunks, AsManyAsEndBeforeTheValidColumns) {
  const BackwardChunks chunks = chunks_of(8192, 128256, true);  // 16 chunks, the last 5,376 wide
  EXPECT_EQ(keepable_chunks(chunks, 128256, 256, 5), 5) << "the budget's limit";
  EXPECT_EQ(keepable_chunks(chunks, 128256, 256, 40), 15) << "one chunk left to recompute";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 128256, false), 128256, 256, 40), 15) << "all but the first in the keep buffer";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 40000, true), 40000, 256, 40), 4);
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 40960, true), 40960, 256, 40), 4) << "5 x 8192 is all of it";
  EXPECT_EQ(keepable_chunks(chunks_of(8192, 40960, true), 24577, 256, 40), 3) << "valid columns bound it";
}

TEST(KeepBufferAtBuild, OnlyWhatCallsOfUpToMaxRowsCanKeep) {
  const std::int64_t budget = std::int64_t{256} << 20;
  BackwardChunks most = chunks_of(8192, 128256, true);  // 16 chunks, a second kept in the accumulator
  EXPECT_EQ(keep_buffer_bytes_at_build(most, budget, budget), budget) << "one further chunk: the default";
  EXPECT_EQ(keep_buffer_bytes_at_build(most, budget, std::int64_t{8} << 30), 13 * budget) << "16 - 3 at most";
  EXPECT_EQ(keep_buffer_bytes_at_build(most, budget, 0), 0);
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(8192, 128256, false), budget, budget), budget) << "no second in place";
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(8192, 128256, false), budget, std::int64_t{8} << 30), 14 * budget)
      << "16 - 2 at most: the second in the keep buffer too";
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(43008, 128256, false), budget, budget), budget)
      << "three chunks, the second in the keep buffer";
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(32256, 128256, true), budget, budget), budget) << "four chunks";
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(43008, 128256, true), budget, budget), 0) << "three chunks";
  EXPECT_EQ(keep_buffer_bytes_at_build(chunks_of(128256, 128256, true), budget, budget), 0) << "one chunk";
}

TEST(KeptChunksBudget, TheOnesInPlaceAndWholeChunksOfTheKeepBuffer) {
  const BackwardChunks chunks = chunks_of(8192, 128256, true);
  const std::int64_t n = 16384;
  const std::int64_t chunk = n * 8192 * 2;  // 256 MiB: llama3-8b-16k's chunk of the default dZ budget
  EXPECT_EQ(kept_chunk_bytes(chunks, n), static_cast<std::size_t>(chunk));
  EXPECT_EQ(kept_chunks_budget(chunks, n, 0), 2) << "no keep buffer: the two in place";
  EXPECT_EQ(kept_chunks_budget(chunks, n, LinearLogpConfig{}.keep_logits_bytes), 3) << "the default: one further";
  EXPECT_EQ(kept_chunks_budget(chunks, n, chunk - 1), 2);
  EXPECT_EQ(kept_chunks_budget(chunks, n, chunk), 3);
  EXPECT_EQ(kept_chunks_budget(chunks, n, 3 * chunk + chunk / 2), 5);
  EXPECT_EQ(kept_chunks_budget(chunks, n, std::int64_t{4} << 30), 18) << "16 further: as many as the call has";
  EXPECT_EQ(kept_chunks_budget(chunks, n, std::int64_t{1} << 62), 18) << "no overflow";
  EXPECT_EQ(kept_chunks_budget(chunks, 0, chunk), 2) << "no rows";
  // Together: at 4 GiB the forward keeps 15 of the 16 chunks; the backward recomputes the last.
  EXPECT_EQ(keepable_chunks(chunks, 128256, 256, kept_chunks_budget(chunks, n, std::int64_t{4} << 30)), 15);
}

TEST(KeptChunksBudget, OneInPlaceWhereTheAccumulatorCannotHoldTheSecond) {
  // qwen2.5-7b at 4097 rows: five chunks of 30,464 columns, each wider than the accumulator's rows.
  const std::int64_t n = 4097;
  const BackwardChunks chunks = chunks_of(30464, 152064, false);
  const std::int64_t chunk = n * 30464 * 2;
  EXPECT_EQ(chunks_kept_in_place(chunks), 1);
  EXPECT_EQ(chunks_kept_in_place(chunks_of(8192, 128256, true)), 2);
  EXPECT_EQ(kept_chunks_budget(chunks, n, 0), 1) << "no keep buffer: the first alone";
  EXPECT_EQ(kept_chunks_budget(chunks, n, chunk), 2) << "the second in the keep buffer";
  EXPECT_EQ(kept_chunks_budget(chunks, n, LinearLogpConfig{}.keep_logits_bytes), 2) << "the default holds one chunk";
  EXPECT_EQ(keepable_chunks(chunks, 152064, 256, kept_chunks_budget(chunks, n, std::int64_t{4} << 30)), 4)
      << "all but the last";
}

TEST(KeptChunksBudget, NegativeBudgetIsRefusedByName) {
  LinearLogpConfig c;
  c.keep_logits_bytes = -1;
  try {
    check_backward_config(c);
    FAIL() << "a negative keep_logits_bytes was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("keep_logits_bytes"), std::string::npos) << e.what();
  }
  c.keep_logits_bytes = std::int64_t{4} << 30;
  EXPECT_NO_THROW(check_backward_config(c));
}

class UsableKeptChunks : public ::testing::Test {
 protected:
  void SetUp() override {
    kept.hidden = &hidden;
    kept.weight = &weight;
    kept.lse = &lse;
    kept.n = 100;
    kept.hidden_stride = 4096;
    kept.weight_stride = 4096;
    kept.cols = 8192;
    kept.dz = &dz;
    kept.second = &second;
    kept.accumulator = &accumulator;
    kept.capture = 7;
    call.hidden = &hidden;
    call.weight = &weight;
    call.lse = &lse;
    call.n = 100;
    call.hidden_stride = 4096;
    call.weight_stride = 4096;
    call.grad_hidden = true;
    call.capture = 7;
    call.dz_buffer = &dz;
    call.accumulator = &accumulator;
  }
  int hidden = 0, weight = 0, dz = 0, second = 0, accumulator = 0;
  float lse = 0.0f;
  KeptChunk kept;
  BackwardKeptMatch call;
  BackwardChunks chunks = chunks_of(8192, 128256, true);
};

TEST_F(UsableKeptChunks, BothByTheBackwardOfTheirForward) {
  const KeptChunksUse use = usable_kept_chunks(kept, chunks, call);
  EXPECT_TRUE(use.first);
  EXPECT_TRUE(use.second);
}

TEST_F(UsableKeptChunks, NoneWhenAnInputOrTheCaptureDiffers) {
  float other_lse = 0.0f;
  BackwardKeptMatch other = call;
  other.lse = &other_lse;
  EXPECT_FALSE(usable_kept_chunks(kept, chunks, other).first) << "lse names the forward";
  other = call;
  other.capture = 8;
  EXPECT_FALSE(usable_kept_chunks(kept, chunks, other).first) << "another capture sequence";
  other = call;
  other.n = 99;
  EXPECT_FALSE(usable_kept_chunks(kept, chunks, other).first);
  other = call;
  other.dz_buffer_grew = true;
  EXPECT_FALSE(usable_kept_chunks(kept, chunks, other).second) << "a grown dZ buffer loses both";
  EXPECT_FALSE(usable_kept_chunks(kept, chunks_of(4096, 128256, true), call).first) << "another chunk width";
}

TEST_F(UsableKeptChunks, TheFirstAloneWhereTheAccumulatorChanged) {
  BackwardKeptMatch other = call;
  other.accumulator_grew = true;
  KeptChunksUse use = usable_kept_chunks(kept, chunks, other);
  EXPECT_TRUE(use.first);
  EXPECT_FALSE(use.second);
  use = usable_kept_chunks(kept, chunks_of(8192, 128256, false), call);
  EXPECT_TRUE(use.first);
  EXPECT_FALSE(use.second) << "grad_hidden cannot run in bands";
  other = call;
  other.grad_hidden = false;
  EXPECT_TRUE(usable_kept_chunks(kept, chunks_of(8192, 128256, false), other).second) << "no product to band";
  kept.second = nullptr;
  EXPECT_FALSE(usable_kept_chunks(kept, chunks, call).second) << "only the first was kept";
}

TEST_F(UsableKeptChunks, FurtherChunksWithTheirKeepBuffer) {
  int further = 0, keep = 0, other_keep = 0;
  kept.further = &further;
  kept.further_begin = 2;
  kept.further_chunks = 3;
  kept.keep_buffer = &keep;
  call.keep_buffer = &keep;
  KeptChunksUse use = usable_kept_chunks(kept, chunks, call);
  EXPECT_EQ(use.further, 3);
  EXPECT_TRUE(use.uses(0) && use.uses(1) && use.uses(2) && use.uses(4));
  EXPECT_FALSE(use.uses(5)) << "past the kept ones";
  BackwardKeptMatch other = call;
  other.keep_buffer = &other_keep;
  EXPECT_EQ(usable_kept_chunks(kept, chunks, other).further, 0) << "another keep buffer";
  other = call;
  other.accumulator_grew = true;
  use = usable_kept_chunks(kept, chunks, other);
  EXPECT_TRUE(use.first);
  EXPECT_FALSE(use.second);
  EXPECT_EQ(use.further, 3) << "the keep buffer does not depend on the accumulator";
  EXPECT_TRUE(use.uses(2) && !use.uses(1));
  other = call;
  other.dz_buffer_grew = true;
  EXPECT_EQ(usable_kept_chunks(kept, chunks, other).further, 0) << "not without the first";
  EXPECT_EQ(usable_kept_chunks(kept, chunks_of(8192, 5 * 8192, true), call).further, 0) << "no chunk left to recompute";
  EXPECT_EQ(usable_kept_chunks(kept, chunks_of(8192, 5 * 8192 + 256, true), call).further, 3);
}

TEST_F(UsableKeptChunks, FurtherChunksFromTheSecondWhereItIsNotInPlace) {
  int further = 0, keep = 0;
  kept.second = nullptr;
  kept.accumulator = nullptr;
  kept.further = &further;
  kept.further_begin = 1;
  kept.further_chunks = 2;
  kept.keep_buffer = &keep;
  call.keep_buffer = &keep;
  const KeptChunksUse use = usable_kept_chunks(kept, chunks, call);
  EXPECT_TRUE(use.first);
  EXPECT_FALSE(use.second);
  EXPECT_EQ(use.further_begin, 1);
  EXPECT_EQ(use.further, 2);
  EXPECT_TRUE(use.uses(0) && use.uses(1) && use.uses(2));
  EXPECT_FALSE(use.uses(3)) << "past the kept ones";
  EXPECT_EQ(usable_kept_chunks(kept, chunks_of(8192, 3 * 8192, false), call).further, 0) << "no chunk left to recompute";
}

}  // namespace
}  // namespace shardjit
