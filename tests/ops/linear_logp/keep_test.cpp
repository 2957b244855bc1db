// The kept-chunk decisions (runtime/ops/linear_logp/keep.hpp): which ops keep, how many chunks a
// forward may keep by the chunks' shape, and which kept chunks a backward call may use.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

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

TEST(ForwardKeepsWholeChunk, OnlyASingleChunkKeptWholeOnAPlanOfTheRowsAsN) {
  VocabSplit rows_as_n;
  rows_as_n.tile_rows = 152;
  rows_as_n.tile_cols = 128;
  rows_as_n.rows_as_n = true;
  VocabSplit wide;
  wide.tile_rows = 128;
  wide.tile_cols = 256;
  const BackwardChunks whole = chunks_of(16032, 16032, true);
  EXPECT_TRUE(forward_keeps_whole_chunk(whole, 1, rows_as_n));
  EXPECT_FALSE(forward_keeps_whole_chunk(whole, 1, wide)) << "the kept chunk's own kernel on 128-row tiles";
  VocabSplit rows_as_n_256 = rows_as_n;
  rows_as_n_256.tile_cols = 256;
  EXPECT_FALSE(forward_keeps_whole_chunk(whole, 1, rows_as_n_256)) << "256 columns: no keeping kernel";
  EXPECT_FALSE(forward_keeps_whole_chunk(whole, 0, rows_as_n)) << "a call that keeps nothing";
  EXPECT_FALSE(forward_keeps_whole_chunk(chunks_of(8192, 128256, true), 1, rows_as_n))
      << "a first chunk of several: the forward kernel runs past it (first_tile)";
}

// The partials workspace's slots of a launch: the forward kernel's sources, a source per column
// tile of the kept chunks, and, where the forward kernel keeps the chunk itself, its tile maxima.
TEST(ForwardLaunchSlots, SourcesThenTheKeepingForwardsTileMaxima) {
  ForwardLaunch past_kept;  // the forward kernel past two kept chunks of 16 dZ tiles each
  past_kept.split.splits = 3;
  past_kept.kept_chunks = 2;
  past_kept.kept_cols = 8192;
  past_kept.kept_tiles = 32;
  EXPECT_EQ(past_kept.partial_slots(), past_kept.split.sources() + 32);
  EXPECT_EQ(past_kept.forward_first_col(), 8192);

  ForwardLaunch keeps = past_kept;  // a single chunk kept whole by the forward kernel
  keeps.kept_chunks = 1;
  keeps.kept_cols = 16032;
  keeps.kept_tiles = 0;
  keeps.forward_keeps = true;
  keeps.kept_max_tiles = 126;  // 16032 columns (its dZ rows' end) by 128
  EXPECT_EQ(keeps.sources(), keeps.split.sources());
  EXPECT_EQ(keeps.partial_slots(), keeps.split.sources() + 126);
  EXPECT_EQ(keeps.forward_first_col(), 0) << "the keeping forward covers the whole shard";

  ForwardLaunch whole = keeps;  // the same chunk kept by the kept chunk's kernel alone
  whole.forward_kernel = false;
  whole.forward_keeps = false;
  whole.kept_max_tiles = 0;
  whole.kept_tiles = 63;
  EXPECT_EQ(whole.partial_slots(), 63) << "no forward kernel, no sources of its own";
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
  const std::int64_t band = 1024 * 8192 * 2;  // the accumulator's rows for the second kept chunk
  EXPECT_EQ(kept_chunks_budget(chunks, n, keep_logits_budget(LinearLogpConfig{}, n * 4096 * 4 + band)), 3)
      << "the default beside the accumulator and its band, 496 MiB: one further";
  EXPECT_EQ(kept_chunks_budget(chunks, n, keep_logits_budget(LinearLogpConfig{}, n * 2048 * 4)), 4)
      << "at H 2048, 640 MiB: two further";
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
  EXPECT_EQ(kept_chunks_budget(chunks, n, keep_logits_budget(LinearLogpConfig{}, n * 3584 * 4)), 3)
      << "the default beside a 56 MiB accumulator, 712 MiB: two further";
  EXPECT_EQ(keepable_chunks(chunks, 152064, 256, kept_chunks_budget(chunks, n, std::int64_t{4} << 30)), 4)
      << "all but the last";
}

TEST(KeptChunksBudget, NegativeBudgetOtherThanAutoIsRefusedByName) {
  LinearLogpConfig c;
  EXPECT_EQ(c.keep_logits_bytes, kKeepLogitsAuto) << "the default";
  EXPECT_NO_THROW(check_backward_config(c));
  c.keep_logits_bytes = -2;
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

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(KeepLogitsBudget, AutoHoldsTheBuffersWithinOneGibAndNeverBelowTheFloor) {
  LinearLogpConfig c;
  EXPECT_EQ(keep_logits_budget(c, 0), 768 * kMiB) << "no accumulator: 1 GiB less the dZ budget";
  EXPECT_EQ(keep_logits_budget(c, 56 * kMiB), 712 * kMiB) << "qwen2.5-7b at 4097 rows";
  EXPECT_EQ(keep_logits_budget(c, 256 * kMiB), 512 * kMiB) << "llama3-8b at 16384 rows";
  EXPECT_EQ(keep_logits_budget(c, 512 * kMiB), 256 * kMiB) << "llama3-70b at 16384 rows: the floor";
  EXPECT_EQ(keep_logits_budget(c, 2048 * kMiB), 256 * kMiB) << "the floor";
  c.backward_workspace_bytes = 512 * kMiB;
  EXPECT_EQ(keep_logits_budget(c, 128 * kMiB), 384 * kMiB) << "a larger dZ budget leaves less";
  c.keep_logits_bytes = 0;
  EXPECT_EQ(keep_logits_budget(c, 0), 0) << "a number is taken as it is";
  c.keep_logits_bytes = std::int64_t{4} << 30;
  EXPECT_EQ(keep_logits_budget(c, 512 * kMiB), std::int64_t{4} << 30);
}

// A call's chunks needing `dz` and `accumulator` bytes.
BackwardChunks needing(std::int64_t dz, std::int64_t accumulator) {
  BackwardChunks chunks;
  chunks.dz_bytes = static_cast<std::size_t>(dz);
  chunks.accumulator_bytes = static_cast<std::size_t>(accumulator);
  return chunks;
}

TEST(BackwardBufferBudget, TheKeepRoomIsTheCapPastTheDzBuffer) {
  const LinearLogpConfig c;
  const BackwardBufferBudget fresh = backward_buffer_budget(c, {}, needing(256 * kMiB, 256 * kMiB));
  EXPECT_EQ(fresh.keep_budget, 512 * kMiB);
  EXPECT_EQ(fresh.cap, 768 * kMiB);
  EXPECT_EQ(fresh.keep_room, 512 * kMiB);
  EXPECT_FALSE(fresh.release_dz || fresh.release_keep);
  // A whole shard's dZ (no accumulator) takes its room from the keep buffer's.
  const BackwardBufferBudget whole = backward_buffer_budget(c, {}, needing(900 * kMiB, 0));
  EXPECT_EQ(whole.cap, 1024 * kMiB);
  EXPECT_EQ(whole.keep_room, 124 * kMiB);
  EXPECT_EQ(backward_buffer_budget(c, {1000 * kMiB, 0, 0}, needing(100 * kMiB, 0)).keep_room, 24 * kMiB)
      << "the dZ buffer as held";
}

TEST(BackwardBufferBudget, AGrowingAccumulatorReleasesWhatTheSmallerBudgetNoLongerAllows) {
  const LinearLogpConfig c;
  // A whole shard of 1000 MiB, then a call of many rows with a 512 MiB accumulator: the cap falls
  // to 512 MiB, so the dZ buffer goes and comes back at the call's 256 MiB.
  BackwardBufferBudget b = backward_buffer_budget(c, {1000 * kMiB, 0, 0}, needing(256 * kMiB, 512 * kMiB));
  EXPECT_TRUE(b.release_dz);
  EXPECT_FALSE(b.release_keep);
  EXPECT_EQ(b.keep_room, 256 * kMiB);
  // A keep buffer of 512 MiB grown beside a small accumulator, then the 512 MiB accumulator.
  b = backward_buffer_budget(c, {256 * kMiB, 64 * kMiB, 512 * kMiB}, needing(256 * kMiB, 512 * kMiB));
  EXPECT_FALSE(b.release_dz);
  EXPECT_TRUE(b.release_keep);
  // The accumulator held already: nothing grows, nothing is released.
  b = backward_buffer_budget(c, {256 * kMiB, 512 * kMiB, 256 * kMiB}, needing(256 * kMiB, 64 * kMiB));
  EXPECT_FALSE(b.release_dz || b.release_keep);
  EXPECT_EQ(b.keep_room, 256 * kMiB);
  // A fixed budget: a whole shard's dZ past the dZ budget releases the keep buffer it now shares.
  LinearLogpConfig fixed;
  fixed.keep_logits_bytes = 256 * kMiB;
  b = backward_buffer_budget(fixed, {256 * kMiB, 0, 256 * kMiB}, needing(400 * kMiB, 0));
  EXPECT_FALSE(b.release_dz);
  EXPECT_TRUE(b.release_keep);
  EXPECT_EQ(b.keep_room, 112 * kMiB);
}

// The buffers of one op as the simulation below holds them: the counted accumulator (the largest
// planned, LinearLogpBwdState::held) apart from the allocated one.
struct SimulatedOp {
  LinearLogpConfig c;
  std::int64_t hidden = 0, vocab = 0;
  BackwardBuffers held;           // held.accumulator: the counted one
  std::int64_t accumulator = 0;   // allocated
  int releases = 0;

  // backward_chunks as the op plans a call: the whole shard by the counted accumulator's budget.
  BackwardChunks plan(std::int64_t n, bool grad_hidden) const {
    BackwardChunksInput in;
    in.n_rows = n;
    in.hidden = hidden;
    in.vocab_local = vocab;
    in.tile_cols = 256;
    in.hidden_accumulator = grad_hidden;
    in.keep_band_rows = 1024;
    in.whole_budget = whole_shard_budget(in, keep_logits_budget(c, held.accumulator), 0);
    return backward_chunks(in);
  }
  // LinearLogpBwdState::reserve: the budget, the release, the growth. A release comes only with a
  // call that grows a buffer or plans a larger accumulator than any before.
  BackwardBufferBudget reserve(const BackwardChunks& chunks, bool grow_accumulator) {
    const BackwardBufferBudget budget = backward_buffer_budget(c, held, chunks);
    const bool larger = static_cast<std::int64_t>(chunks.dz_bytes) > held.dz ||
                        static_cast<std::int64_t>(chunks.accumulator_bytes) > held.accumulator;
    if (budget.release_dz || budget.release_keep) {
      EXPECT_TRUE(larger) << "a release by a call that plans nothing larger";
    }
    if (budget.release_dz) held.dz = 0;
    if (budget.release_keep) held.keep = 0;
    releases += budget.release_dz || budget.release_keep;
    held.dz = std::max(held.dz, static_cast<std::int64_t>(chunks.dz_bytes));
    held.accumulator = std::max(held.accumulator, static_cast<std::int64_t>(chunks.accumulator_bytes));
    if (grow_accumulator) accumulator = std::max(accumulator, static_cast<std::int64_t>(chunks.accumulator_bytes));
    return budget;
  }
  // What the op holds never passes 1 GiB, or the dZ budget, the floor and the counted
  // accumulator where those pass it; and the dZ and keep buffers lie within the cap, the keep
  // buffer within what the dZ buffer leaves of it, so that a call of a size run before (as
  // under graph capture) frees nothing.
  void check_bound(const std::string& where) const {
    const std::int64_t bound =
        std::max(kAutoKeepTotalBytes, kDefaultBackwardWorkspaceBytes + kAutoKeepFloorBytes + held.accumulator);
    EXPECT_LE(held.dz + accumulator + held.keep, bound) << where;
    const std::int64_t cap = kDefaultBackwardWorkspaceBytes + keep_logits_budget(c, held.accumulator);
    EXPECT_LE(held.dz, std::max(cap, kDefaultBackwardWorkspaceBytes)) << where;
    EXPECT_LE(held.keep, std::clamp<std::int64_t>(cap - held.dz, 0, keep_logits_budget(c, held.accumulator))) << where;
  }
};

// Calls of any sizes in any order on one op, each a forward that keeps what its room allows and
// a backward with or without grad_hidden, as the op runs them (the forward's reserve counts the
// accumulator it leaves to the backward): the bound holds after every step, and by the third
// time through the same calls nothing is freed (the counted accumulator only grows, the buffers
// settle).
TEST(BackwardBufferBudget, HeldBuffersStayWithinTheAutoBudgetOverCallSequences) {
  const std::int64_t rows[] = {1, 7, 333, 1024, 2000, 4097, 8192, 16384, 32768};
  for (const std::int64_t hidden : {2048, 4096, 8192}) {
    for (const std::int64_t vocab : {32000, 128256, 256000}) {
      for (int order = 0; order < 6; ++order) {
        for (const bool grad_hidden : {true, false}) {
          SCOPED_TRACE("H " + std::to_string(hidden) + ", V " + std::to_string(vocab) + ", order " +
                       std::to_string(order) + (grad_hidden ? "" : ", no grad_hidden"));
          SimulatedOp op;
          op.hidden = hidden;
          op.vocab = vocab;
          int releases_before_third = 0;
          for (int call = 0; call < 36; ++call) {
            if (call == 24) releases_before_third = op.releases;
            const std::int64_t n = rows[(call % 12 * (order + 2) + order * order) % 9];
            const std::string where = std::to_string(n) + " rows";
            // The forward: the grad_hidden plan, its keep room, the chunks it keeps.
            const BackwardChunks chunks = op.plan(n, true);
            const BackwardBufferBudget budget = backward_buffer_budget(op.c, op.held, chunks);
            const int kept = keepable_chunks(chunks, vocab, 256, kept_chunks_budget(chunks, n, budget.keep_room));
            const int in_place = std::min(kept, chunks_kept_in_place(chunks));
            op.reserve(chunks, in_place >= 2);
            const auto keep =
                static_cast<std::int64_t>(kept - in_place) * static_cast<std::int64_t>(kept_chunk_bytes(chunks, n));
            ASSERT_LE(keep, backward_buffer_budget(op.c, op.held, chunks).keep_room) << where;
            op.held.keep = std::max(op.held.keep, keep);
            op.check_bound("after the forward of " + where);
            // The backward.
            op.reserve(op.plan(n, grad_hidden), true);
            op.check_bound("after the backward of " + where);
          }
          EXPECT_EQ(op.releases, releases_before_third) << "a release the third time through";
        }
      }
    }
  }
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
  other.keep_buffer_released = true;
  EXPECT_EQ(usable_kept_chunks(kept, chunks, other).further, 0) << "freed, and a new one at the same address";
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
