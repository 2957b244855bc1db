// TP=2 LinearLogp forward, one process per GPU: every rank gets bitwise the same logp, lse and
// entropy, and they match the single-GPU op over the whole vocabulary (which the gpu tier checks
// against fp64).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tp_problem.hpp"

namespace shardjit {
namespace {

using namespace testing;

// Partials are merged in another order than on one GPU; the logits themselves are the same.
constexpr double kTolerance = 5e-4;

TEST(TpForward, EqualsTheSingleGpuOpAndIsBitwiseEqualOnEveryRank) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) { run_tp_forward_rank(ctx, p, targets, true); });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  expect_matches_single_gpu(outcomes, p.entropy, kTolerance);
  for (const RankOutcome& o : outcomes) EXPECT_EQ(o.report.text("tp_bad_rows"), "0") << o.rank;
  const auto logp = outcomes[0].report.get<float>("tp_logp");
  for (std::size_t i = 0; i < logp.size(); ++i) {
    EXPECT_TRUE(std::isfinite(logp[i])) << "row " << i;
    EXPECT_LE(logp[i], 1e-5f) << "row " << i;
  }
}

TEST(TpForward, UnevenShardsWithPadding) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = uneven_problem();  // 384 + 616 ids, the last 10 padding
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) { run_tp_forward_rank(ctx, p, targets, true); });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  expect_matches_single_gpu(outcomes, p.entropy, kTolerance);
}

TEST(TpForward, IgnoredAndOutOfRangeTargetsOnEveryRank) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  auto targets = make_targets(p);
  for (std::size_t i = 10; i < targets.size(); i += 7) targets[i] = -100;  // ignore_index
  targets[5] = 5000;  // past vocab_global
  targets[6] = -7;    // negative, not ignore_index
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) { run_tp_forward_rank(ctx, p, targets, true); });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  expect_matches_single_gpu(outcomes, p.entropy, kTolerance);  // NaN rows must match NaN rows
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.report.text("tp_bad_rows"), "2") << "rank " << o.rank << " must report both bad rows";
    const std::string first = o.report.text("tp_first_bad_id");
    EXPECT_TRUE(first == "5000" || first == "-7") << "rank " << o.rank << ": " << first;
    const auto logp = o.report.get<float>("tp_logp");
    EXPECT_TRUE(std::isnan(logp[5]) && std::isnan(logp[6])) << "rank " << o.rank;
    for (std::size_t i = 10; i < logp.size(); i += 7) EXPECT_EQ(logp[i], 0.0f) << "ignored row " << i;
  }
  EXPECT_EQ(outcomes[0].report.text("ref_bad_rows"), "2");
}

TEST(TpForward, LlamaShapes) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = llama_problem();  // H 4096, V 128256 as 2 x 64128
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) { run_tp_forward_rank(ctx, p, targets, true); });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  expect_matches_single_gpu(outcomes, p.entropy, kTolerance);
}

TEST(TpForward, RepeatedCallsGiveTheSameBits) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = Communicator::create(runtime, ctx.rank, ctx.rank, ctx.size, ctx.unique_id, comm_options());
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    RankTensors tensors(p, shard, targets, device);
    LinearLogp op(runtime, config_for(p, shard, ctx.rank), comm);
    for (int call = 0; call < 3; ++call) {
      tensors.poison();
      op.forward(tensors.inputs(), tensors.outputs(), nullptr);
      op.check(nullptr);
      tensors.report(ctx.report, "call" + std::to_string(call) + "_");
    }
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    for (int call = 1; call < 3; ++call) {
      EXPECT_EQ(o.report.bytes("call" + std::to_string(call) + "_lse"), outcomes[0].report.bytes("call0_lse"))
          << "rank " << o.rank << " call " << call;
    }
  }
}

}  // namespace
}  // namespace shardjit
