// How the backward is laid out: vocabulary chunks within the dZ budget, the kernels an op with
// want_backward loads, and the config errors of the backward options.
#include <gtest/gtest.h>

#include <limits>

#include "linear_logp/bwd_dz_layout.cuh"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

BackwardChunksInput input(std::int64_t n, std::int64_t vocab, std::int64_t budget) {
  BackwardChunksInput in;
  in.n_rows = n;
  in.hidden = 4096;
  in.vocab_local = vocab;
  in.budget = budget;
  return in;
}

void expect_covers(const BackwardChunks& plan, std::int64_t vocab) {
  std::int64_t next = 0;
  for (std::int64_t i = 0; i < plan.chunks; ++i) {
    BackwardChunk chunk = plan.chunk(i);
    EXPECT_EQ(chunk.begin, next);
    EXPECT_GT(chunk.cols, 0);
    EXPECT_LE(chunk.cols, plan.chunk_cols);
    EXPECT_LE(chunk.cols, plan.dz_stride);
    EXPECT_EQ(chunk.begin % 128, 0) << "chunks start on tile boundaries";
    next += chunk.cols;
  }
  EXPECT_EQ(next, vocab);
}

TEST(BwdChunks, OneChunkWhenTheWholeVocabularyFits) {
  BackwardChunks plan = backward_chunks(input(1000, 50257, kDefaultBackwardWorkspaceBytes));
  EXPECT_EQ(plan.chunks, 1);
  EXPECT_EQ(plan.dz_stride, 50264) << "50257 rounded up to a multiple of 8";
  EXPECT_EQ(plan.dz_bytes, 1000u * 50264u * 2u);
  EXPECT_EQ(plan.accumulator_bytes, 0u);
  expect_covers(plan, 50257);
}

// An op that keeps chunks takes a call's whole shard as one chunk where it fits the dZ and keep
// budgets together (whole_budget), so that its forward keeps all of it: 2000 rows of a 128k
// vocabulary (489 MiB) in 256 + 256 MiB, not 2100 (513 MiB).
TEST(BwdChunks, TheWholeShardIsOneChunkWithinTheDzAndKeepBudgets) {
  BackwardChunksInput in = input(2000, 128256, kDefaultBackwardWorkspaceBytes);
  in.hidden_accumulator = true;
  EXPECT_EQ(backward_chunks(in).chunks, 2) << "the dZ budget alone";
  in.whole_budget = 2 * kDefaultBackwardWorkspaceBytes;
  BackwardChunks plan = backward_chunks(in);
  EXPECT_EQ(plan.chunks, 1);
  EXPECT_EQ(plan.dz_bytes, 2000u * 128256u * 2u);
  EXPECT_EQ(plan.accumulator_bytes, 0u) << "one chunk writes grad_hidden directly";
  expect_covers(plan, 128256);
  in.n_rows = 2100;
  plan = backward_chunks(in);
  EXPECT_EQ(plan.chunks, 3) << "513 MiB do not fit: chunks of the dZ budget";
  EXPECT_LE(plan.dz_bytes, static_cast<std::size_t>(kDefaultBackwardWorkspaceBytes));
  // A dZ budget below one tile column, a whole shard within whole_budget: one chunk, no error.
  BackwardChunksInput tiny = input(10, 1000, 100);
  tiny.whole_budget = 1 << 20;
  EXPECT_TRUE(backward_chunk_fits(tiny));
  EXPECT_EQ(backward_chunks(tiny).chunks, 1);
  tiny.whole_budget = 0;
  EXPECT_FALSE(backward_chunk_fits(tiny));
}

// The whole-shard budget of an op: dZ + keep budgets, saturating ("no limit" stays no limit);
// with max_rows only where a call of max_rows rows is itself one chunk by it, so that the
// build does not reserve smaller calls' whole-shard dZ out of the keep budget.
TEST(BwdChunks, TheWholeShardBudgetOfAnOp) {
  const std::int64_t budget = kDefaultBackwardWorkspaceBytes;
  const std::int64_t most = std::numeric_limits<std::int64_t>::max();
  BackwardChunksInput in = input(1, 128256, budget);
  EXPECT_EQ(whole_shard_budget(in, budget, 0), 2 * budget);
  EXPECT_EQ(whole_shard_budget(in, 0, 0), budget);
  EXPECT_EQ(whole_shard_budget(in, most, 0), most) << "no overflow";
  EXPECT_EQ(saturating_budget_sum(most - 1, 5), most);
  EXPECT_EQ(saturating_budget_sum(3, 4), 7);
  EXPECT_EQ(whole_shard_budget(in, budget, 2000), 2 * budget) << "2000 rows (489 MiB) are one chunk";
  EXPECT_EQ(whole_shard_budget(in, budget, 4096), 0) << "4096 rows are not: calls keep further chunks";
  EXPECT_EQ(whole_shard_budget(in, most, 16384), most) << "no limit: every call is one chunk";
  in.whole_budget = most;
  in.n_rows = 16384;
  EXPECT_EQ(backward_chunks(in).chunks, 1);
}

TEST(BwdChunks, StayWithinTheBudgetAndAreBalanced) {
  for (std::int64_t n : {1, 129, 1000, 4096, 16384, 65536, 1 << 20}) {
    for (std::int64_t vocab : {1, 300, 50257, 128256, 151936}) {
      BackwardChunksInput in = input(n, vocab, kDefaultBackwardWorkspaceBytes);
      in.hidden_accumulator = true;
      BackwardChunks plan = backward_chunks(in);
      EXPECT_LE(plan.dz_bytes, static_cast<std::size_t>(kDefaultBackwardWorkspaceBytes)) << n << " x " << vocab;
      EXPECT_EQ(plan.dz_stride % 8, 0);
      EXPECT_EQ(plan.chunk_cols % 128, 0);
      expect_covers(plan, vocab);
      // As few chunks as the budget allows.
      const std::int64_t widest = kDefaultBackwardWorkspaceBytes / (n * 2) / 128 * 128;
      EXPECT_LT((plan.chunks - 1) * widest, vocab) << n << " x " << vocab;
      if (plan.chunks > 1) {
        EXPECT_EQ(plan.accumulator_bytes, static_cast<std::size_t>(n) * 4096u * 4u);
      } else {
        EXPECT_EQ(plan.accumulator_bytes, 0u) << "one chunk writes grad_hidden directly";
      }
    }
  }
}

// Fewer rows get wider chunks, so a call below max_rows can need a larger dZ buffer than one of
// max_rows: what an op reserves covers every call up to max_rows, and no more than the largest.
TEST(BwdChunks, TheReserveCoversEveryCallUpToMaxRows) {
  struct Case {
    std::int64_t vocab;
    std::int64_t max_rows;
    int tile_cols;
    bool filter;
    std::int64_t whole_budget = 0;
  };
  for (const Case& c : {Case{1000000, 1000, 256, false}, Case{1000000, 4096, 256, true},
                        Case{128256, 3000, 128, true}, Case{50257, 700, 256, false},
                        Case{128256, 3000, 256, false, 2 * kDefaultBackwardWorkspaceBytes},
                        Case{1000000, 1000, 256, false, 3 * kDefaultBackwardWorkspaceBytes}}) {
    BackwardChunksInput in = input(c.max_rows, c.vocab, kDefaultBackwardWorkspaceBytes);
    in.tile_cols = c.tile_cols;
    in.filter = c.filter;
    in.whole_budget = c.whole_budget;
    in.hidden_accumulator = true;
    const BackwardChunks reserve = backward_chunks_reserve(in);
    std::size_t dz_most = 0;
    std::size_t mask_most = 0;
    std::size_t accumulator_most = 0;
    for (std::int64_t n = 1; n <= c.max_rows; ++n) {
      BackwardChunksInput call = in;
      call.n_rows = n;
      const BackwardChunks plan = backward_chunks(call);
      dz_most = std::max(dz_most, plan.dz_bytes);
      mask_most = std::max(mask_most, plan.mask_bytes);
      accumulator_most = std::max(accumulator_most, plan.accumulator_bytes);
    }
    EXPECT_EQ(reserve.dz_bytes, dz_most) << c.vocab << " x " << c.max_rows;
    EXPECT_EQ(reserve.mask_bytes, mask_most) << c.vocab << " x " << c.max_rows;
    EXPECT_EQ(reserve.accumulator_bytes, accumulator_most) << c.vocab << " x " << c.max_rows;
  }
  // The case where max_rows' own plan falls short: 804 rows need more dZ than 1000 do.
  BackwardChunksInput in = input(1000, 1000000, kDefaultBackwardWorkspaceBytes);
  in.tile_cols = 256;
  EXPECT_GT(backward_chunks_reserve(in).dz_bytes, backward_chunks(in).dz_bytes);
}

// The chunk width rule: a Hopper backward on 132 blocks (128 x 256 tiles of dZ and of both GEMMs).
BackwardChunksInput hopper_input(std::int64_t n, std::int64_t hidden, std::int64_t vocab) {
  BackwardChunksInput in = input(n, vocab, kDefaultBackwardWorkspaceBytes);
  in.hidden = hidden;
  in.tile_cols = 256;
  in.hidden_accumulator = true;
  in.wave_resident = 132;
  in.gemm_tile = BwdTileShape{128, 256, 64};
  return in;
}

// gemma2-2b's head at 16384 rows: the widest chunk (32 dZ tile columns, 8192 columns) gives
// grad_weight 64 x 9 = 576 tiles, 4.36 waves whose fifth is a third full; 29 columns give 522,
// 3.95 waves, for three more chunks of the other two kernels.
TEST(BwdChunkWidth, NarrowsWhereGradWeightsLastWaveIsMostlyIdle) {
  BackwardChunksInput in = hopper_input(16384, 2304, 256000);
  const BackwardChunks plan = backward_chunks(in);
  EXPECT_EQ(plan.chunk_cols, 29 * 256);
  EXPECT_EQ(plan.chunks, 35);
  expect_covers(plan, 256000);
  EXPECT_LT(backward_chunks_wave_cost(in, 29), 0.97 * backward_chunks_wave_cost(in, 32));
  in.wave_resident = 0;
  EXPECT_EQ(backward_chunks(in).chunk_cols, 32 * 256) << "without the rule: the widest";
}

TEST(BwdChunkWidth, KeepsTheWidestWhereItsWavesAreFull) {
  // llama3-8b at 16384 rows: grad_weight 1024 tiles (7.76 waves), dZ 4096 (31.03): no narrower
  // width within 3/4 fills them better by the rule's margin (1.5 %).
  EXPECT_EQ(backward_chunks(hopper_input(16384, 4096, 128256)).chunk_cols, 8192);
  // Fewer than three chunks at the widest: the width stays (the buffers' bound, below).
  const BackwardChunks two = backward_chunks(hopper_input(4097, 4096, 64000));
  EXPECT_EQ(two.chunks, 2);
  BackwardChunksInput off = hopper_input(4097, 4096, 64000);
  off.wave_resident = 0;
  EXPECT_EQ(two.chunk_cols, backward_chunks(off).chunk_cols);
}

TEST(BwdChunkWidth, NeverNarrowerThanThreeQuartersOfTheWidest) {
  for (const std::int64_t n : {1024, 2048, 4097, 8192, 16384, 32768}) {
    for (const std::int64_t hidden : {2048, 2304, 2880, 3584, 4096, 7168}) {
      BackwardChunksInput in = hopper_input(n, hidden, 201088);
      const BackwardChunks plan = backward_chunks(in);
      in.wave_resident = 0;
      const BackwardChunks widest = backward_chunks(in);
      EXPECT_LE(plan.chunk_cols, widest.chunk_cols) << n << " x " << hidden;
      EXPECT_GE(4 * plan.chunk_cols, 3 * widest.chunk_cols) << n << " x " << hidden;
      EXPECT_LE(plan.dz_bytes, widest.dz_bytes) << n << " x " << hidden;
      expect_covers(plan, 201088);
    }
  }
}

// What an op built with max_rows reserves holds every call's buffers under the rule too, second
// kept chunks' bands included: at qwen3-1.7b's 24576 rows the widest chunk (5376 columns) is too
// wide for the accumulator's rows (2 x 2048), the rule's 4096 columns would not be, and the bands
// stay off as in the widest plan (the reserve's).
TEST(BwdChunkWidth, TheReserveHoldsEveryCallsBuffers) {
  struct Case {
    std::int64_t max_rows;
    std::int64_t hidden;
    std::int64_t vocab;
  };
  for (const Case& c : {Case{5000, 2304, 256000}, Case{5000, 4096, 256000}, Case{24576, 2048, 151936},
                        Case{22000, 2880, 201088}}) {
    const std::int64_t hidden = c.hidden;
    BackwardChunksInput in = hopper_input(c.max_rows, hidden, c.vocab);
    in.keep_band_rows = kept_band_rows_for(hidden, 128, 256, 132);
    const BackwardChunks reserve = backward_chunks_reserve(in);
    bool narrowed = false;
    for (std::int64_t n = 1; n <= in.n_rows; ++n) {
      BackwardChunksInput call = in;
      call.n_rows = n;
      const BackwardChunks plan = backward_chunks(call);
      call.wave_resident = 0;
      narrowed = narrowed || plan.chunk_cols < backward_chunks(call).chunk_cols;
      ASSERT_LE(plan.dz_bytes, reserve.dz_bytes) << n;
      ASSERT_LE(plan.mask_bytes, reserve.mask_bytes) << n;
      ASSERT_LE(plan.accumulator_bytes, reserve.accumulator_bytes) << n;
    }
    EXPECT_TRUE(narrowed) << hidden << ": the rule narrowed some call's chunks";
  }
  BackwardChunksInput qwen = hopper_input(24576, 2048, 151936);
  qwen.keep_band_rows = kept_band_rows_for(2048, 128, 256, 132);
  const BackwardChunks narrowed = backward_chunks(qwen);
  EXPECT_EQ(narrowed.chunk_cols, 4096);
  EXPECT_EQ(narrowed.kept_band_rows, 0) << "decided by the widest chunk, 5376 columns";
}

// A second kept chunk in the accumulator: where the plan allows it, and that no band of the first
// grad_hidden product writes over logits that it or a later band still reads.
TEST(BwdChunks, ASecondKeptChunkLiesBehindTheBandsOfTheFirstProduct) {
  const std::int64_t band_rows = kept_band_rows_for(4096, 128, 256, 132);
  EXPECT_EQ(band_rows, 1024) << "8 row tiles of 16 tiles: one wave of 132 blocks";
  EXPECT_EQ(kept_band_rows_for(100000, 128, 256, 132), 128) << "at least one row tile";
  EXPECT_EQ(kept_band_rows_for(64, 128, 256, 132), 128 * 132);
  struct Case {
    std::int64_t n, hidden, vocab, budget;
    bool kept;
  };
  const Case cases[] = {
      {16384, 4096, 128256, kDefaultBackwardWorkspaceBytes, true},  // llama3-8b-16k: C = 8192 = 2 H
      {4096, 4096, 151936, kDefaultBackwardWorkspaceBytes, false},  // C = 32768 > 2 H
      {4500, 1024, 2548, 4500 * 2 * 1024, true},                    // C = H, bands of 1024 rows
      {4500, 1024, 2548, 4500 * 2 * 2304, false},                   // two chunks: chunk 1 is the last
      {1000, 128, 1000, 1000 * 2 * 256, true},                      // C = 2 H, one band
      {1000, 128, 1000, 1000 * 2 * 512, false},                     // C = 4 H
      {17, 4096, 128256, 17 * 2 * 8192, true},                      // fewer rows than a band
      {5000, 4096, 128256, 5000 * 2 * 8192, true},                  // C = 2 H, a partial last band
      {4501, 1000, 2548, 4501 * 2 * 1024, true},                    // N 4H not a multiple of 256
  };
  for (const Case& c : cases) {
    BackwardChunksInput in = input(c.n, c.vocab, c.budget);
    in.hidden = c.hidden;
    in.tile_cols = 256;
    in.hidden_accumulator = true;
    in.keep_band_rows = 1024;
    const BackwardChunks plan = backward_chunks(in);
    const std::size_t rows_bytes = static_cast<std::size_t>(c.n * c.hidden) * 4u;
    const std::size_t rows_bytes_256 = (rows_bytes + 255) / 256 * 256;
    SCOPED_TRACE(std::to_string(c.n) + " x " + std::to_string(c.hidden) + " x " + std::to_string(c.vocab));
    if (!c.kept) {
      EXPECT_EQ(plan.kept_band_rows, 0);
      EXPECT_EQ(plan.accumulator_bytes, plan.chunks > 1 ? rows_bytes : 0u);
      continue;
    }
    ASSERT_EQ(plan.kept_band_rows, 1024);
    ASSERT_GE(plan.chunks, 3);
    const auto logits_row = static_cast<std::size_t>(plan.dz_stride) * 2u;
    const auto band = static_cast<std::size_t>(std::min<std::int64_t>(1024, c.n));
    EXPECT_EQ(plan.accumulator_bytes, rows_bytes_256 + band * logits_row);
    EXPECT_EQ(plan.accumulator_kept_offset + plan.dz_bytes, plan.accumulator_bytes) << "the logits end the buffer";
    EXPECT_EQ(plan.accumulator_kept_offset % 16, 0u) << "TMA's alignment";
    for (std::int64_t row = 0; row < c.n; row += plan.kept_band_rows) {
      const std::int64_t end = std::min(row + plan.kept_band_rows, c.n);
      const std::size_t written_end = static_cast<std::size_t>(end * c.hidden) * 4u;
      const std::size_t unread_begin = plan.accumulator_kept_offset + static_cast<std::size_t>(row) * logits_row;
      EXPECT_LE(written_end, unread_begin) << "band from row " << row;
    }
    // Without the keep, the same plan has no extra bytes.
    in.keep_band_rows = 0;
    EXPECT_EQ(backward_chunks(in).accumulator_bytes, rows_bytes);
  }
  // What an op with max_rows reserves covers the longer accumulator.
  BackwardChunksInput in = input(16384, 128256, kDefaultBackwardWorkspaceBytes);
  in.tile_cols = 256;
  in.hidden_accumulator = true;
  in.keep_band_rows = 1024;
  EXPECT_EQ(backward_chunks_reserve(in).accumulator_bytes, backward_chunks(in).accumulator_bytes);
  EXPECT_EQ(backward_chunks(in).accumulator_bytes, (256u << 20) + (16u << 20));
}

TEST(BwdChunks, LargeBatchesOfALargeVocabularyAreChunked) {
  BackwardChunks plan = backward_chunks(input(16384, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_EQ(plan.chunks, 16);
  EXPECT_EQ(plan.chunk_cols, 8064);
}

TEST(BwdChunks, SmallBudgetsGiveManyChunks) {
  BackwardChunks plan = backward_chunks(input(100, 1000, 100 * 128 * 2 * 3));
  EXPECT_EQ(plan.chunk_cols, 384);
  EXPECT_EQ(plan.chunks, 3);
  EXPECT_EQ(plan.chunk(2).cols, 1000 - 768);
  expect_covers(plan, 1000);
}

TEST(BwdChunks, FilteringNeedsAByteATile) {
  BackwardChunksInput in = input(1000, 50257, kDefaultBackwardWorkspaceBytes);
  in.filter = true;
  EXPECT_EQ(backward_chunks(in).mask_bytes, 8u * 393u);
}

TEST(BwdChunks, ZeroRowsPlanNoBuffers) {
  BackwardChunks plan = backward_chunks(input(0, 300, kDefaultBackwardWorkspaceBytes));
  EXPECT_EQ(plan.dz_bytes, 0u);
  expect_covers(plan, 300);
}

TEST(BwdChunks, ABudgetBelowOneTileColumnIsAClearError) {
  try {
    backward_chunks(input(1 << 20, 128256, 1 << 20));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string message = e.what();
    EXPECT_NE(message.find("backward_workspace_bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("268435456"), std::string::npos) << "names the bytes needed: " << message;
  }
}

TEST(BwdChunks, FitsSaysWithoutThrowingWhetherOneTileColumnFits) {
  // input()'s tiles are 128 columns of 2 bytes: 256 bytes a row.
  EXPECT_TRUE(backward_chunk_fits(input(4096, 128256, 4096 * 256)));
  EXPECT_FALSE(backward_chunk_fits(input(4097, 128256, 4096 * 256)));
  EXPECT_NO_THROW(backward_chunks(input(4096, 128256, 4096 * 256)));
  EXPECT_THROW(backward_chunks(input(4097, 128256, 4096 * 256)), Error);
}

LinearLogpConfig backward_config(DType dtype) {
  LinearLogpConfig c;
  c.hidden = 64;
  c.vocab_local = 300;
  c.dtype = dtype;
  c.want_backward = true;
  return c;
}

// The kept chunk's dZ kernel: a block a row where the rows give every multiprocessor one; for
// fewer rows, a row's columns shared out among eight blocks a multiprocessor, no more of them
// than the row has passes of a block.
TEST(BwdKeptDz, FewRowsShareTheirColumnsOutAmongBlocks) {
  auto blocks = [](long long rows, int cols, int multiprocessors = 132) {
    return kernels::linear_logp_bwd_kept_dz_row_blocks(rows, cols, multiprocessors);
  };
  EXPECT_EQ(blocks(4097, 128256), 1);
  EXPECT_EQ(blocks(256, 128256), 1);
  EXPECT_EQ(blocks(132, 128256), 1);
  EXPECT_EQ(blocks(131, 128256), 9) << "rows x blocks fill the GPU";
  EXPECT_EQ(blocks(7, 128256), 63) << "one block a pass of 2048 columns";
  EXPECT_EQ(blocks(100, 2560), 2);
  EXPECT_EQ(blocks(1, 2049), 2);
  EXPECT_EQ(blocks(1, 2048), 1);
  EXPECT_EQ(blocks(1, 300), 1);
  EXPECT_EQ(blocks(1, 8), 1);
  EXPECT_EQ(blocks(1, 1 << 30), 1056);
  EXPECT_EQ(blocks(1, 1 << 30, 108), 864) << "the device's multiprocessors";
  EXPECT_EQ(blocks(120, 128256, 108), 1);
  EXPECT_EQ(blocks(7, 128256, 0), 1) << "no device count: a block a row";
}

TEST(BwdKernels, OnlyLoadedWhenAskedFor) {
  LinearLogpConfig c = backward_config(DType::kBF16);
  c.want_backward = false;
  EXPECT_FALSE(linear_logp_kernels(resolve_layout(c), "sm_90a").backward.has_value());
}

TEST(BwdKernels, SixteenBitOpsKeepDzInTheirTypeAndUseTensorCores) {
  LinearLogpConfig c = backward_config(DType::kBF16);
  c.bias_dtype = DType::kFP16;
  LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(c), "sm_90a").backward;
  EXPECT_EQ(k.dz_dtype, DType::kBF16);
  EXPECT_EQ(k.dz.type_param("DZ"), "bf16");
  EXPECT_FALSE(k.dz.bool_param("FILTER"));
  ASSERT_TRUE(k.scale.has_value()) << "16-bit dZ is stored scaled";
  ASSERT_TRUE(k.bias.has_value());
  EXPECT_EQ(k.bias->type_param("OutT"), "fp16") << "grad_bias in the bias dtype by default";
  EXPECT_TRUE(k.grad_weight.bool_param("A_TRANS"));
  EXPECT_EQ(k.grad_weight.type_param("OutT"), "bf16");
  EXPECT_EQ(k.grad_hidden_acc.type_param("OutT"), "fp32");
  EXPECT_EQ(k.grad_hidden_out.type_param("OutT"), "bf16");
  EXPECT_EQ(k.grad_hidden_out.type_param("AddT"), "fp32") << "the last chunk adds the fp32 accumulator";
  // A single-GPU op keeps its first chunk from the forward: three kernels more, the backward's
  // for maxima by the dZ tile's 256 columns and by the 128 of the forward's tiles of the rows as N.
  ASSERT_TRUE(k.keep.has_value());
  ASSERT_TRUE(k.kept_dz.has_value());
  ASSERT_TRUE(k.kept_dz_columns.has_value());
  EXPECT_EQ(k.keep->template_name(), "linear_logp_fwd_keep");
  EXPECT_EQ(k.kept_dz->type_param("DZ"), "bf16");
  EXPECT_EQ(k.kept_dz->int_param("BN"), 256);
  EXPECT_EQ(k.kept_dz_columns->type_param("DZ"), "bf16");
  EXPECT_EQ(k.kept_dz_columns->int_param("BN"), 128);
  // grad_hidden on the tiles of the rows as N: an accumulating and a final kernel a tile.
  ASSERT_EQ(k.grad_hidden_rows_as_n.size(), std::size(kGemmRowsAsNRows));
  for (const LinearLogpBwdKernels::RowsAsN& tile : k.grad_hidden_rows_as_n) {
    for (const KernelSpec* spec : {&tile.acc, &tile.out}) {
      EXPECT_TRUE(spec->bool_param("ROWS_AS_N"));
      EXPECT_FALSE(spec->bool_param("A_TRANS"));
      EXPECT_EQ(spec->int_param("BM"), tile.bm);
      EXPECT_EQ(spec->int_param("BN"), 128);
    }
    EXPECT_EQ(tile.acc.type_param("OutT"), "fp32");
    EXPECT_EQ(tile.out.type_param("OutT"), "bf16");
  }
  EXPECT_EQ(k.all().size(), 9u + 2 * std::size(kGemmRowsAsNRows));
  // The portable loop has none.
  EXPECT_TRUE(linear_logp_kernels(resolve_layout(c), "sm_90a", 1, false).backward->grad_hidden_rows_as_n.empty());
  // A TP op does not (its partials cross NVLink), nor one that filters.
  EXPECT_FALSE(linear_logp_kernels(resolve_layout(c), "sm_90a", 2).backward->keep.has_value());
  c.grad_filter_threshold = 1e-6f;
  EXPECT_FALSE(linear_logp_kernels(resolve_layout(c), "sm_90a").backward->keep.has_value());
}

void expect_tile(const FwdTile& t, int bm, int bn, int bk, int stages, const char* what) {
  EXPECT_EQ(t.bm, bm) << what;
  EXPECT_EQ(t.bn, bn) << what;
  EXPECT_EQ(t.bk, bk) << what;
  EXPECT_EQ(t.stages, stages) << what;
}

void expect_tile(const GemmTile& t, int bm, int bn, int bk, int stages, const char* what) {
  EXPECT_EQ(t.bm, bm) << what;
  EXPECT_EQ(t.bn, bn) << what;
  EXPECT_EQ(t.bk, bk) << what;
  EXPECT_EQ(t.stages, stages) << what;
}

TEST(BwdKernels, SixteenBitTilesAreTheForwardsPerArch) {
  // docs/perf-notes.md, "Portable forward": 64 x 64 warp blocks in 128 x 256 tiles wherever they fit.
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(backward_config(dtype)), "sm_90a").backward;
    // The wgmma loops keep one slice in flight: a fourth stage. The dZ kernel's register
    // epilogue needs only the tile max beside its ring.
    expect_tile(k.dz_tile, 128, 256, 64, 4, "dZ, sm_90a");
    expect_tile(k.gemm_tile, 128, 256, 64, 4, "GEMM, sm_90a");
    EXPECT_TRUE(k.dz_tile.wgmma);
    EXPECT_TRUE(k.gemm_tile.wgmma);
    EXPECT_TRUE(k.gemm_tile.tma);
    EXPECT_TRUE(k.grad_weight.bool_param("TMA"));
    // The TMA ring, its mbarriers, two tile max and the epilogue's staging rows.
    // The ring, then its mbarriers and the region in the next KiB, then the staging area.
    EXPECT_EQ(linear_logp_bwd_dz_smem(dtype, k.dz_tile), 4u * (128 + 256) * 64 * 2 + 1024 + 128 * 272);
    EXPECT_LE(linear_logp_bwd_dz_smem(dtype, k.dz_tile), smem_limit_for_arch("sm_90a"));
    EXPECT_EQ(linear_logp_bwd_dz_smem(dtype, default_bwd_dz_tile(dtype, "sm_90a", false)), 219664u);
    // The TMA ring's stages, a full and an empty mbarrier each, and for a 16-bit output the
    // epilogue's staging area from the next KiB on.
    EXPECT_EQ(gemm_smem(k.grad_hidden_out_kind, k.gemm_tile), 196608u + 1024 + 128 * 272);
    EXPECT_EQ(gemm_smem(k.grad_weight_kind, k.gemm_tile), 196608u + 1024 + 128 * 272);
    EXPECT_EQ(gemm_smem(k.grad_hidden_acc_kind, k.gemm_tile), 196608u + 4 * 16) << "fp32 accumulator";
    EXPECT_LE(gemm_smem(k.grad_hidden_out_kind, k.gemm_tile), smem_limit_for_arch("sm_90a"));
    EXPECT_EQ(k.dz.int_param("BN"), 256);
    EXPECT_EQ(k.grad_weight.int_param("BN"), 256);
    EXPECT_EQ(k.grad_hidden_out.int_param("BK"), 64);
    // An fp32 grad_weight is stored from the registers: no staging area.
    LinearLogpConfig fp32_weight = backward_config(dtype);
    fp32_weight.grad_weight_fp32 = true;
    LinearLogpBwdKernels kw = *linear_logp_kernels(resolve_layout(fp32_weight), "sm_90a").backward;
    EXPECT_EQ(kw.grad_weight_kind.out, DType::kFP32);
    EXPECT_EQ(gemm_smem(kw.grad_weight_kind, kw.gemm_tile), 196608u + 4 * 16);
  }
  LinearLogpBwdKernels a100 = *linear_logp_kernels(resolve_layout(backward_config(DType::kBF16)), "sm_80").backward;
  expect_tile(a100.dz_tile, 128, 256, 32, 3, "dZ, sm_80");
  expect_tile(a100.gemm_tile, 128, 256, 64, 3, "GEMM, sm_80");
  EXPECT_FALSE(a100.gemm_tile.tma);
  LinearLogpBwdKernels small = *linear_logp_kernels(resolve_layout(backward_config(DType::kBF16)), "sm_86").backward;
  expect_tile(small.dz_tile, 64, 256, 32, 3, "dZ, sm_86");
  expect_tile(small.gemm_tile, 128, 256, 32, 3, "GEMM, sm_86");
}

TEST(BwdKernels, Fp32TilesAreUnchanged) {
  LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(backward_config(DType::kFP32)), "sm_90a").backward;
  expect_tile(k.dz_tile, 128, 128, 32, 3, "fp32 dZ");
  expect_tile(k.gemm_tile, 128, 128, 16, 3, "fp32 GEMM");
  LinearLogpConfig c = backward_config(DType::kBF16);
  c.dz_fp32 = true;  // fp32 dZ against bf16 operands: the FMA loop
  expect_tile(linear_logp_kernels(resolve_layout(c), "sm_90a").backward->gemm_tile, 128, 128, 16, 3, "fp32 dZ GEMM");
}

TEST(BwdChunks, ChunksOfTheHopperDzTile) {
  BackwardChunksInput in = input(16384, 128256, kDefaultBackwardWorkspaceBytes);
  in.tile_cols = 256;
  in.filter = true;
  BackwardChunks plan = backward_chunks(in);
  EXPECT_EQ(plan.chunks, 16);
  EXPECT_EQ(plan.chunk_cols, 8192);
  EXPECT_EQ(plan.dz_stride, 8192);
  EXPECT_LE(plan.dz_bytes, static_cast<std::size_t>(kDefaultBackwardWorkspaceBytes));
  EXPECT_EQ(plan.mask_bytes, 128u * 32u) << "a byte per 128 x 256 dZ tile";
  expect_covers(plan, 128256);
}

TEST(BwdKernels, Fp32OpsAccumulateGradHiddenInPlace) {
  LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(backward_config(DType::kFP32)), "sm_80").backward;
  EXPECT_EQ(k.dz_dtype, DType::kFP32);
  EXPECT_FALSE(k.scale.has_value());
  EXPECT_FALSE(k.bias.has_value());
  EXPECT_EQ(k.grad_hidden_acc, k.grad_hidden_out);
  EXPECT_EQ(k.all().size(), 3u);
}

TEST(BwdKernels, OptionsReachTheSpecs) {
  LinearLogpConfig c = backward_config(DType::kFP16);
  c.bias_dtype = DType::kBF16;
  c.grad_weight_fp32 = true;
  c.dz_fp32 = true;
  c.grad_filter_threshold = 1e-6f;
  LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(c), "sm_80").backward;
  EXPECT_EQ(k.grad_weight.type_param("OutT"), "fp32");
  EXPECT_EQ(k.bias->type_param("OutT"), "fp32");
  EXPECT_EQ(k.dz.type_param("DZ"), "fp32");
  EXPECT_EQ(k.grad_weight.type_param("TA"), "fp32");
  EXPECT_EQ(k.grad_weight.type_param("TB"), "fp16");
  EXPECT_TRUE(k.dz.bool_param("FILTER"));
  EXPECT_TRUE(k.grad_hidden_out.bool_param("FILTER"));
  EXPECT_FALSE(k.scale.has_value()) << "fp32 dZ needs no scale";
}

TEST(BwdKernels, DzTileFitsTheArch) {
  for (const char* arch : {"sm_80", "sm_86", "sm_90a"}) {
    for (DType dtype : {DType::kBF16, DType::kFP32}) {
      LinearLogpBwdKernels k = *linear_logp_kernels(resolve_layout(backward_config(dtype)), arch).backward;
      EXPECT_LE(linear_logp_bwd_dz_smem(dtype, k.dz_tile), smem_limit_for_arch(arch)) << arch;
      for (const GemmKind& kind : {k.grad_weight_kind, k.grad_hidden_acc_kind, k.grad_hidden_out_kind}) {
        EXPECT_LE(gemm_smem(kind, k.gemm_tile), smem_limit_for_arch(arch)) << arch;
      }
    }
  }
}

TEST(BwdConfig, BadOptionsNameTheField) {
  LinearLogpConfig c = backward_config(DType::kBF16);
  c.backward_workspace_bytes = -1;
  try {
    linear_logp_kernels(resolve_layout(c), "sm_80");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("backward_workspace_bytes"), std::string::npos) << e.what();
  }
  c = backward_config(DType::kBF16);
  for (float bad : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    c.grad_filter_threshold = bad;
    try {
      linear_logp_kernels(resolve_layout(c), "sm_80");
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("grad_filter_threshold"), std::string::npos) << e.what();
    }
  }
}

TEST(BwdConfig, WorkspaceBudgetDefaultsTo256MiB) {
  LinearLogpConfig c;
  EXPECT_EQ(backward_workspace_budget(c), 256 << 20);
  c.backward_workspace_bytes = 1 << 20;
  EXPECT_EQ(backward_workspace_budget(c), 1 << 20);
}

TEST(GemmSpec, TilesUpTo64x64AWarp) {
  GemmKind kind;
  for (GemmTile tile : {GemmTile{128, 256, 64, 3}, GemmTile{256, 128, 64, 3}, GemmTile{128, 128, 32, 4},
                        GemmTile{64, 256, 32, 2}}) {
    EXPECT_NO_THROW(gemm_spec(kind, tile)) << tile.bm << " x " << tile.bn;
  }
  for (GemmTile tile : {GemmTile{256, 256, 32, 2}, GemmTile{192, 128, 32, 2}, GemmTile{128, 512, 32, 2}}) {
    EXPECT_THROW(gemm_spec(kind, tile), Error) << tile.bm << " x " << tile.bn;
  }
  kind.a = DType::kFP32;  // the FMA loop holds at most 128 x 128
  EXPECT_NO_THROW(gemm_spec(kind, GemmTile{128, 128, 16, 3}));
  EXPECT_THROW(gemm_spec(kind, GemmTile{128, 256, 16, 3}), Error);
}

TEST(DzSpec, TilesUpTo64x64AWarp) {
  const LinearLogpLayout layout = resolve_layout(backward_config(DType::kBF16));
  EXPECT_NO_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{128, 256, 64, 3}, true));
  EXPECT_NO_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{256, 128, 64, 3}, false));
  EXPECT_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{256, 256, 32, 2}, false), Error);
  EXPECT_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{192, 128, 32, 2}, false), Error);
  const LinearLogpLayout fp32 = resolve_layout(backward_config(DType::kFP32));
  EXPECT_THROW(linear_logp_bwd_dz_spec(fp32, DType::kFP32, FwdTile{128, 256, 32, 2}, false), Error);
  // The Hopper loop takes its one tile, of 16-bit inputs.
  EXPECT_NO_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{128, 256, 64, 4, true}, false));
  EXPECT_THROW(linear_logp_bwd_dz_spec(layout, DType::kBF16, FwdTile{128, 128, 64, 4, true}, false), Error);
  EXPECT_THROW(linear_logp_bwd_dz_spec(fp32, DType::kFP32, FwdTile{128, 256, 64, 4, true}, false), Error);
}

// The Hopper loop's dZ kernel and the kept chunk's two take the shard at run time: two unrelated
// model shapes (one with a padded, one with an odd vocabulary, and a TP shard) ask for the same
// kernels, which the library can therefore build ahead; the portable dZ kernel is the shape's.
TEST(DzSpec, TheHopperLoopsKernelsHoldNoShape) {
  LinearLogpConfig small = backward_config(DType::kBF16);
  small.valid_vocab = 290;
  LinearLogpConfig large = backward_config(DType::kBF16);
  large.hidden = 2880;
  large.vocab_local = 100544;
  large.vocab_start = 100544;
  large.vocab_global = 201088;
  const LinearLogpLayout a = resolve_layout(small), b = resolve_layout(large);
  const FwdTile hopper{128, 256, 64, 4, true}, portable{128, 256, 64, 3};
  EXPECT_EQ(linear_logp_bwd_dz_spec(a, DType::kBF16, hopper, false), linear_logp_bwd_dz_spec(b, DType::kBF16, hopper, false));
  EXPECT_EQ(linear_logp_fwd_keep_spec(a, hopper), linear_logp_fwd_keep_spec(b, hopper));
  EXPECT_EQ(linear_logp_bwd_kept_dz_spec(a, DType::kBF16, hopper.bn),
            linear_logp_bwd_kept_dz_spec(b, DType::kBF16, hopper.bn));
  EXPECT_EQ(linear_logp_fwd_spec(a, hopper), linear_logp_fwd_spec(b, hopper));
  // The portable loops' dZ kernel and forward are the shape's.
  EXPECT_NE(linear_logp_bwd_dz_spec(a, DType::kBF16, portable, false),
            linear_logp_bwd_dz_spec(b, DType::kBF16, portable, false));
  EXPECT_NE(linear_logp_fwd_spec(a, portable), linear_logp_fwd_spec(b, portable));
}

// The shard's valid columns, which the kernels above no longer hold, come in every launch's
// arguments.
TEST(DzSpec, ChunkArgumentsCarryTheShardsValidColumns) {
  LinearLogpConfig c = backward_config(DType::kBF16);
  c.vocab_local = 160;
  c.vocab_start = 160;
  c.vocab_global = 320;
  c.valid_vocab = 250;
  const LinearLogpLayout layout = resolve_layout(c);
  const kernels::LinearLogpBwdDzArgs args = chunk_logit_args(layout, LinearLogpInputs{}, 5, 64, 64, nullptr, 168, 0, 160);
  EXPECT_EQ(args.valid_local, 90);
  EXPECT_EQ(args.chunk_cols, 160);
  EXPECT_EQ(args.valid_vocab, 250);
}

TEST(GemmSpec, MixedSixteenBitOperandsAreRejected) {
  GemmKind kind;
  kind.a = DType::kBF16;
  kind.b = DType::kFP16;
  EXPECT_THROW(gemm_spec(kind, GemmTile{}), Error);
  kind.a = DType::kFP32;
  EXPECT_NO_THROW(gemm_spec(kind, default_gemm_tile(kind.a, kind.b, "sm_80", true)));
}

TEST(GemmSpec, HopperTileWhereTheForwardHasOne) {
  // 16-bit operands on sm_90a with the Hopper path on: wgmma, 128 x 256 x 64, four stages.
  const GemmTile hopper = default_gemm_tile(DType::kBF16, DType::kBF16, "sm_90a", true);
  EXPECT_TRUE(hopper.wgmma);
  EXPECT_EQ(hopper.bm, 128);
  EXPECT_EQ(hopper.bn, 256);
  EXPECT_EQ(hopper.bk, 64);
  EXPECT_EQ(hopper.stages, 4);
  EXPECT_LE(gemm_smem(GemmKind{DType::kBF16, DType::kBF16, DType::kBF16}, hopper), smem_limit_for_arch("sm_90a"));
  EXPECT_TRUE(default_gemm_tile(DType::kFP16, DType::kFP16, "sm_90a", true).wgmma);
  // Not: the Hopper path off, an fp32 A (the FMA loop), other targets.
  const GemmTile portable = default_gemm_tile(DType::kBF16, DType::kBF16, "sm_90a", false);
  EXPECT_FALSE(portable.wgmma);
  EXPECT_EQ(portable.stages, 3);
  EXPECT_FALSE(default_gemm_tile(DType::kFP32, DType::kBF16, "sm_90a", true).wgmma);
  EXPECT_FALSE(default_gemm_tile(DType::kBF16, DType::kBF16, "sm_90", true).wgmma);
  EXPECT_FALSE(default_gemm_tile(DType::kBF16, DType::kBF16, "sm_100", true).wgmma);
}

TEST(GemmSpec, WgmmaNeedsSixteenBitOperandsAndItsTile) {
  GemmKind kind;
  GemmTile tile{128, 256, 64, 4, true};
  EXPECT_NO_THROW(gemm_spec(kind, tile));
  kind.a_trans = true;
  EXPECT_NO_THROW(gemm_spec(kind, tile));
  tile.bn = 128;
  EXPECT_THROW(gemm_spec(kind, tile), Error);
  kind.a = DType::kFP32;
  EXPECT_THROW(gemm_spec(kind, GemmTile{128, 256, 64, 4, true}), Error);
}

// The tiles of the rows as N: the TMA loop's, of an A [m][k] of 16-bit elements, BM from 160 to
// 256 in steps of 32 by 128 columns.
TEST(GemmSpec, TilesOfTheRowsAsN) {
  GemmKind kind;
  kind.a = kind.b = DType::kBF16;
  for (const int bm : kGemmRowsAsNRows) {
    const GemmTile tile = gemm_rows_as_n_tile(bm);
    EXPECT_TRUE(tile.rows_as_n && tile.tma && tile.wgmma);
    EXPECT_NO_THROW(gemm_spec(kind, tile)) << bm;
    // A stage holds B's 128 columns and A's bm rows; no staging area for the output.
    EXPECT_EQ(gemm_smem(GemmKind{DType::kBF16, DType::kBF16, DType::kBF16}, tile),
              4u * (16384u + 128u * static_cast<unsigned>(bm)) + 64u);
  }
  for (const int bm : {128, 96, 170, 288}) {
    EXPECT_THROW(gemm_spec(kind, gemm_rows_as_n_tile(bm)), Error) << bm;
  }
  GemmTile portable = gemm_rows_as_n_tile(192);
  portable.tma = false;
  EXPECT_THROW(gemm_spec(kind, portable), Error);
  kind.a_trans = true;  // grad_weight's A^T
  EXPECT_THROW(gemm_spec(kind, gemm_rows_as_n_tile(192)), Error);
  kind.a_trans = false;
  kind.a = kind.b = DType::kFP32;
  EXPECT_THROW(gemm_spec(kind, gemm_rows_as_n_tile(192)), Error);
  // Other tiles keep BM and BN to 64, 128 or 256.
  EXPECT_THROW(gemm_spec(GemmKind{}, GemmTile{160, 128, 32, 2}), Error);
}

// The rule (gemm_rows_as_n_rows) on an H100's 132 blocks and clusters, grad_hidden over a 128k
// shard (2004 K slices): the rows as N where their estimate is 5 % below the 128 x 256 tiles', or
// within 5 % of those split whole (which read A once a column tile).
TEST(GemmRowsAsN, RuleTakesTheTileWhereItFillsMoreOfTheGpu) {
  const kernels::StreamKClusters h100{{0, 132, 66, 39, 30, 22, 17, 15, 15}, 0};
  constexpr std::int64_t kL2 = 50 << 20;
  auto rule = [&](std::int64_t m, std::int64_t n, std::int64_t k = 128256) {
    return gemm_rows_as_n_rows(m, n, k, 132, true, h100, kL2);
  };
  // 333 rows, H 8192: 96 tiles of 128 x 256 whole on 96 blocks, against 2 x 64 of 192 x 128 in
  // pairs on 128 (0.81 of the estimate).
  EXPECT_EQ(rule(333, 8192), 192);
  // H 4096: 48 tiles split whole in threes on 117 blocks, against 2 x 32 in pairs on 128 (0.99).
  EXPECT_EQ(rule(333, 4096), 192);
  // 200 and 140 rows in one tile of 224 and 160 rows, against two 128-row tiles (0.94, 0.74).
  EXPECT_EQ(rule(200, 4096), 224);
  EXPECT_EQ(rule(140, 4096), 160);
  // 256 and 512 rows: one and two 256-row tiles, as many rows as the 128 x 256 tiles' split whole
  // (1.03, 0.94), whose runs read dZ (66 MB at 256 rows) once a column tile; not where dZ lies
  // within half the L2 (a 32k shard: 16 MB).
  EXPECT_EQ(rule(256, 4096), 256);
  EXPECT_EQ(rule(512, 4096), 256);
  EXPECT_EQ(rule(256, 4096, 32001), 0);
  EXPECT_EQ(rule(333, 4096, 32000), 0);
  // Not: past two row tiles (kGemmRowsAsNMaxRows: 600 rows, 3 x 224 whole in threes on 96 blocks
  // against 80 tiles split in fives on 110, lost 7 %; 800 rows would estimate 0.91 on single
  // waves, unmeasured; 1100 rows, whose last waves split on every block either way), 333 rows of
  // H 7168 (84 tiles split in threes: 1.13), one row tile of 128 (the product reads W at the
  // memory's pace), no blocks.
  EXPECT_EQ(rule(513, 4096), 0);
  EXPECT_EQ(rule(600, 4096), 0);
  EXPECT_EQ(rule(800, 4096), 0);
  EXPECT_EQ(rule(1100, 4096), 0);
  EXPECT_EQ(rule(333, 7168), 0);
  EXPECT_EQ(rule(7, 4096), 0);
  EXPECT_EQ(rule(128, 4096), 0);
  EXPECT_EQ(rule(1024, 4096), 0);
  EXPECT_EQ(rule(4097, 4096), 0);
  EXPECT_EQ(rule(16384, 4096), 0);
  EXPECT_EQ(gemm_rows_as_n_rows(333, 4096, 128256, 0, true, h100, kL2), 0);
  // Every tile the rule picks has its kernels, and covers the rows.
  for (std::int64_t m = 1; m <= kGemmRowsAsNMaxRows + 100; m += 7) {
    for (const std::int64_t n : {2048, 2880, 4096, 7168, 8192}) {
      for (const std::int64_t k : {16032, 128256}) {
        const int bm = rule(m, n, k);
        if (bm == 0) continue;
        EXPECT_NE(std::find(std::begin(kGemmRowsAsNRows), std::end(kGemmRowsAsNRows), bm),
                  std::end(kGemmRowsAsNRows))
            << m << " x " << n;
        EXPECT_GE(bm * ((m + 255) / 256), m) << "the tiles cover the rows";
      }
    }
  }
}

TEST(GemmSpec, TmaNeedsTheWgmmaLoopOnFourStages) {
  GemmKind kind;
  kind.a = kind.b = DType::kBF16;
  EXPECT_NO_THROW(gemm_spec(kind, GemmTile{128, 256, 64, 4, true, true}));
  EXPECT_THROW(gemm_spec(kind, GemmTile{128, 256, 64, 3, true, true}), Error);  // three stages
  EXPECT_THROW(gemm_spec(kind, GemmTile{128, 256, 64, 4, false, true}), Error);  // the mma.sync loop
}

// Whether a call needs the split workspace (templates/common/stream_k.cuh), on 132
// multiprocessors with the Hopper tiles: only when a kernel's last wave would leave a quarter of
// its launch idle.
TEST(BwdSplits, OnlyCallsWithAMostlyEmptyLastWaveSplit) {
  const BwdTileShape dz{128, 256, 64};
  const BwdTileShape gemm{128, 256, 64};
  // llama3-8b-16k: 4096, 1024 and 2048 tiles a chunk (the last chunk's fewer, still > 66).
  const BackwardChunks large = backward_chunks(input(16384, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_FALSE(backward_splits_tiles(large, 16384, 4096, dz, gemm, 132));
  // llama3-8b-decode: grad_hidden is 2 x 16 = 32 tiles of 2004 slices.
  const BackwardChunks decode = backward_chunks(input(256, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_TRUE(backward_splits_tiles(decode, 256, 4096, dz, gemm, 132));
  EXPECT_FALSE(backward_splits_tiles(decode, 256, 4096, dz, std::nullopt, 132)) << "the portable GEMMs never split";
  EXPECT_FALSE(backward_splits_tiles(decode, 0, 4096, dz, gemm, 132)) << "no rows, no kernels";
  // A narrow vocabulary shard: dZ 8 x 2 = 16 tiles.
  const BackwardChunks narrow = backward_chunks(input(1024, 500, kDefaultBackwardWorkspaceBytes));
  EXPECT_TRUE(backward_splits_tiles(narrow, 1024, 4096, dz, std::nullopt, 132));
  // 1100 rows of llama3-8b in two chunks: grad_hidden is 9 x 16 = 144 tiles a chunk, a full wave
  // and 12 more; dZ 9 x 251 and grad_weight 501 x 16 tiles a chunk, many waves.
  const BackwardChunks rows_1100 = backward_chunks(input(1100, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_TRUE(backward_splits_tiles(rows_1100, 1100, 4096, std::nullopt, gemm, 132));
  EXPECT_FALSE(backward_splits_tiles(rows_1100, 1100, 4096, dz, std::nullopt, 132));
  // 333 rows: 48 tiles split in clusters, or on the tiles of the rows as N 64 tiles split in two.
  const BackwardChunks rows_333 = backward_chunks(input(333, 128256, kDefaultBackwardWorkspaceBytes));
  constexpr std::int64_t kL2 = 50 << 20;
  EXPECT_TRUE(backward_splits_tiles(rows_333, 333, 4096, std::nullopt, gemm, 132, true, {}, true, kL2));
  // H 8192: 128 tiles of the rows as N, one wave, whole without clusters (grad_weight's 501 x 32
  // tiles are many waves); in pairs, a tile a worker, which takes the workspace's plans.
  EXPECT_FALSE(backward_splits_tiles(rows_333, 333, 8192, std::nullopt, gemm, 132, true, {}, true, kL2));
  const kernels::StreamKClusters pairs{{0, 132, 66}, 0};
  EXPECT_TRUE(backward_splits_tiles(rows_333, 333, 8192, std::nullopt, gemm, 132, true, pairs, true, kL2));
  EXPECT_FALSE(backward_splits_tiles(rows_1100, 1100, 4096, std::nullopt, gemm, 132, false))
      << "the rule of grids of at most half the GPU";
  // 1024 rows: grad_hidden's 128 tiles fill one wave.
  const BackwardChunks rows_1024 = backward_chunks(input(1024, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_FALSE(backward_splits_tiles(rows_1024, 1024, 4096, dz, gemm, 132));
  // A second kept chunk's grad_hidden bands: at H = 5120 (20 column tiles) bands of 768 rows, 120
  // tiles; 1920 rows leave a last band of 384 rows, 60 tiles, which splits, while the chunks'
  // grids (grad_hidden 300 tiles, dZ 600 and 315, grad_weight 1600 and 840) do not.
  BackwardChunksInput banded = input(1920, 128256, 1920 * 2 * 10240);
  banded.hidden = 5120;
  banded.tile_cols = 256;
  banded.hidden_accumulator = true;
  banded.keep_band_rows = kept_band_rows_for(5120, 128, 256, 132);
  const BackwardChunks bands = backward_chunks(banded);
  ASSERT_EQ(bands.kept_band_rows, 768);
  EXPECT_TRUE(backward_splits_tiles(bands, 1920, 5120, dz, gemm, 132));
  banded.keep_band_rows = 0;
  EXPECT_FALSE(backward_splits_tiles(backward_chunks(banded), 1920, 5120, dz, gemm, 132)) << "no bands";
}

// Where the GEMMs run in clusters (StreamKWorkspace::clusters), grids of less than a wave that the
// clusters split whole (cluster_stream_k) need the workspace too: grad_hidden at 1024 rows of
// H = 2304 is 8 x 9 = 72 tiles, which 128 blocks in pairs take. At H = 4096 its 128 tiles stay
// whole: the pairs' 128 blocks would not be a third more.
TEST(BwdSplits, GridsThatClustersSplitBelowAWave) {
  const BwdTileShape tile{128, 256, 64};
  const kernels::StreamKClusters h100{{0, 132, 66, 39, 30, 22, 17, 15, 15}, 0};
  BackwardChunksInput in = input(1024, 256000, kDefaultBackwardWorkspaceBytes);
  in.hidden = 2304;
  const BackwardChunks gemma = backward_chunks(in);
  EXPECT_FALSE(backward_splits_tiles(gemma, 1024, 2304, tile, tile, 132)) << "without clusters";
  EXPECT_TRUE(backward_splits_tiles(gemma, 1024, 2304, tile, tile, 132, true, h100));
  EXPECT_FALSE(backward_splits_tiles(gemma, 1024, 2304, tile, std::nullopt, 132, true, h100)) << "no Hopper GEMMs";
  const BackwardChunks llama = backward_chunks(input(1024, 128256, kDefaultBackwardWorkspaceBytes));
  EXPECT_FALSE(backward_splits_tiles(llama, 1024, 4096, tile, tile, 132, true, h100));
}

}  // namespace
}  // namespace shardjit
