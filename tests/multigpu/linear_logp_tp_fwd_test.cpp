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
    TpRank rank(ctx, p, targets);
    auto& [runtime, comm, device, shard, tensors] = rank;
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

// With max_rows set the forward takes the peer path (partials read from the ranks' symmetric
// buffers, no all-gather) for calls of up to max_rows rows, and the NCCL path above: both give
// the same bits, on every rank, and bad targets are reported alike.
TEST(TpForward, PeerPathEqualsTheNcclPathBitwise) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  auto targets = make_targets(p);
  targets[7] = -5;  // out of range, reported by check()
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    TpRank rank(ctx, p, targets);
    auto& [runtime, comm, device, shard, tensors] = rank;
    const std::pair<const char*, std::int64_t> variants[] = {{"peer_", p.n}, {"nccl_", 0}, {"fallback_", p.n - 1}};
    for (const auto& [prefix, max_rows] : variants) {
      LinearLogpConfig config = config_for(p, shard, ctx.rank);
      config.max_rows = max_rows;
      LinearLogp op(runtime, config, comm);
      for (int call = 0; call < 2; ++call) {  // the second call reuses the buffers and epochs
        tensors.poison();
        op.forward(tensors.inputs(), tensors.outputs(), nullptr);
        const BadTargetReport bad = op.check(nullptr);
        ctx.report.put_text(std::string(prefix) + "bad", std::to_string(bad.bad_rows) + " " + std::to_string(bad.first_bad_id));
      }
      tensors.report(ctx.report, prefix);
    }
    if (ctx.rank == 0) report_single_gpu_reference(runtime, p, targets, device, ctx.report);
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    for (const char* prefix : {"nccl_", "fallback_"}) {
      for (const char* key : {"logp", "lse", "entropy"}) {
        EXPECT_EQ(o.report.bytes(std::string(prefix) + key), o.report.bytes(std::string("peer_") + key))
            << prefix << key << " differs from the peer path on rank " << o.rank;
      }
      EXPECT_EQ(o.report.text(std::string(prefix) + "bad"), "1 -5") << prefix;
    }
    EXPECT_EQ(o.report.text("peer_bad"), "1 -5");
    EXPECT_EQ(o.report.bytes("peer_lse"), outcomes[0].report.bytes("peer_lse")) << "rank " << o.rank;
  }
  const RankReport& r0 = outcomes[0].report;
  for (const char* key : {"logp", "lse", "entropy"}) {
    const Diff d = compare(r0.get<float>(std::string("peer_") + key), r0.get<float>(std::string("ref_") + key));
    std::printf("[ accuracy ] tp peer path vs single-GPU %-8s max|d| %.3e rel-norm %.3e\n", key, d.max_abs, d.rel_norm);
    EXPECT_EQ(d.nan_mismatches, 0) << key;
    EXPECT_LE(d.max_abs, kTolerance) << key;
  }
}

// Rank 1 builds the op and exits; rank 0's peer-path combine gives up after the timeout: NaN
// rows and Error(kCommError) from check(), not a hang.
TEST(TpForward, PeerPathWithADeadPeerTimesOut) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = base_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    TpRank rank(ctx, p, targets);
    auto& [runtime, comm, device, shard, tensors] = rank;
    LinearLogpConfig config = config_for(p, shard, ctx.rank);
    config.max_rows = p.n;
    LinearLogp op(runtime, config, comm);
    if (ctx.rank == 1) std::_Exit(0);
    comm.set_timeout(std::chrono::seconds(3));
    tensors.poison();
    op.forward(tensors.inputs(), tensors.outputs(), nullptr);
    ctx.report.put_text("check", check_outcome(op));
    const auto logp = tensors.logp.to_vector<float>(static_cast<std::size_t>(p.n));
    ctx.report.put_text("nan", std::isnan(logp[0]) && std::isnan(logp.back()) ? "yes" : "no");
  }, std::chrono::seconds(60));
  ASSERT_EQ(outcomes.size(), 2u);
  ASSERT_TRUE(outcomes[0].finished && outcomes[0].error.empty()) << describe(outcomes);
  const std::string check = outcomes[0].report.text("check");
  EXPECT_TRUE(is_comm_error(check)) << check;
  EXPECT_NE(check.find("gave up waiting for a peer"), std::string::npos) << check;
  EXPECT_EQ(outcomes[0].report.text("nan"), "yes");
}

}  // namespace
}  // namespace shardjit
