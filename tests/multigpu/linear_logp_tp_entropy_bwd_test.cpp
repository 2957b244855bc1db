// TP=2 LinearLogp backward with the entropy's gradient against the single-GPU backward over the
// whole vocabulary: each rank's dZ of its shard is exact from the global lse and entropy, so
// grad_weight and grad_bias are the single-GPU rows of the shard; grad_hidden summed over the
// ranks (reduce_hidden) is the single-GPU value, and without the sum each rank's partial is what
// the ranks' partials add up to.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tp_problem.hpp"

namespace shardjit {
namespace {

using namespace testing;

struct EntropyGrads {
  EntropyGrads(const TpProblem& p, Shard shard, const DeviceContext& device)
      : hidden(static_cast<std::size_t>(p.n * p.hidden) * 2, device),
        weight(static_cast<std::size_t>(shard.size * p.hidden) * 4, device),
        bias(static_cast<std::size_t>(shard.size) * 4, device),
        rows(p.n),
        cols(p.hidden),
        vocab(shard.size) {}

  LinearLogpGrads views(bool reduce_hidden) const {
    LinearLogpGrads g;
    g.hidden = {hidden.data(), DType::kBF16, rows, cols, 0};
    g.weight = {weight.data(), DType::kFP32, vocab, cols, 0};
    g.bias = {bias.data(), DType::kFP32, vocab};
    g.reduce_hidden = reduce_hidden;
    return g;
  }

  void report(RankReport& to, const std::string& prefix) const {
    to.put(prefix + "grad_hidden", hidden.to_vector<std::uint16_t>(static_cast<std::size_t>(rows * cols)));
    to.put(prefix + "grad_weight", weight.to_vector<float>(static_cast<std::size_t>(vocab * cols)));
    to.put(prefix + "grad_bias", bias.to_vector<float>(static_cast<std::size_t>(vocab)));
  }

  DeviceArray hidden, weight, bias;
  std::int64_t rows, cols, vocab;
};

struct Upstream {
  DeviceArray grad_logp, grad_lse, grad_entropy;
};

// Forward (with entropy), then backward with every upstream gradient; gradients reported under
// `prefix`.
void forward_backward(LinearLogp& op, RankTensors& tensors, const Upstream& up, EntropyGrads& grads,
                      bool reduce_hidden, RankReport& report, const std::string& prefix) {
  const std::int64_t n = tensors.problem.n;
  tensors.poison();
  for (DeviceArray* g : {&grads.hidden, &grads.weight, &grads.bias}) g->fill_bytes(0xff);
  op.forward(tensors.inputs(), tensors.outputs(), nullptr);
  const LinearLogpBackwardInputs inputs{{tensors.lse.data(), DType::kFP32, n},
                                        {tensors.entropy.data(), DType::kFP32, n},
                                        {up.grad_logp.data(), DType::kFP32, n},
                                        {up.grad_lse.data(), DType::kFP32, n},
                                        {up.grad_entropy.data(), DType::kFP32, n}};
  op.backward(tensors.inputs(), inputs, grads.views(reduce_hidden), nullptr);
  op.check(nullptr);
  grads.report(report, prefix);
}

LinearLogpConfig entropy_backward_config(const TpProblem& p, Shard shard, int device) {
  LinearLogpConfig c = config_for(p, shard, device);
  c.want_backward = true;
  c.grad_weight_fp32 = true;
  return c;
}

TEST(TpBackward, TheEntropyGradientEqualsTheSingleGpuOneWithAndWithoutTheReduction) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = uneven_problem();  // shards of 384 and 616 rows, 10 of padding; entropy on
  ASSERT_TRUE(p.entropy);
  auto targets = make_targets(p);
  for (std::size_t i = 9; i < targets.size(); i += 11) targets[i] = -100;
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    auto upstream = [&](std::uint64_t seed, float scale) {
      return DeviceArray::from(random_bytes(seed, 0, p.n, scale, DType::kFP32), device);
    };
    const Upstream up{upstream(p.seed + 10, 1.0f), upstream(p.seed + 11, 0.25f), upstream(p.seed + 12, 2.0f)};
    RankTensors tensors(p, shard, targets, device);
    EntropyGrads grads(p, shard, device);
    LinearLogp op(runtime, entropy_backward_config(p, shard, ctx.rank), comm);
    forward_backward(op, tensors, up, grads, true, ctx.report, "reduced_");
    forward_backward(op, tensors, up, grads, false, ctx.report, "partial_");
    ctx.report.put_text("start", std::to_string(shard.start));
    if (ctx.rank == 0) {
      RankTensors full(p, full_vocab(p), targets, device);
      EntropyGrads full_grads(p, full_vocab(p), device);
      LinearLogp single(runtime, entropy_backward_config(p, full_vocab(p), ctx.rank));
      forward_backward(single, full, up, full_grads, true, ctx.report, "ref_");
    }
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;

  const RankReport& r0 = outcomes[0].report;
  const auto ref_hidden = bf16_values(r0.get<std::uint16_t>("ref_grad_hidden"));
  const double hidden_scale = max_abs_of(ref_hidden);
  EXPECT_GT(hidden_scale, 0.0);
  // Summed over the ranks: the same bits on every rank, the single-GPU value up to rounding.
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.report.bytes("reduced_grad_hidden"), r0.bytes("reduced_grad_hidden")) << "rank " << o.rank;
  }
  const Diff reduced = compare(bf16_values(r0.get<std::uint16_t>("reduced_grad_hidden")), ref_hidden);
  EXPECT_EQ(reduced.nan_mismatches, 0);
  EXPECT_LE(reduced.max_abs, hidden_scale / 64);
  EXPECT_LE(reduced.rel_norm, 4e-3);
  // Each rank's partial alone: the ranks' partials add up to the single-GPU value (each rounded
  // to bf16 once), and neither is that value by itself.
  std::vector<float> sum(ref_hidden.size(), 0.0f);
  for (const RankOutcome& o : outcomes) {
    const auto partial = bf16_values(o.report.get<std::uint16_t>("partial_grad_hidden"));
    EXPECT_GT(compare(partial, ref_hidden).rel_norm, 0.05) << "rank " << o.rank << "'s partial is the whole sum";
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += partial[i];
  }
  const Diff summed = compare(sum, ref_hidden);
  std::printf("[ accuracy ] tp entropy grad_hidden reduced rel-norm %.3e, partials summed rel-norm %.3e\n",
              reduced.rel_norm, summed.rel_norm);
  EXPECT_EQ(summed.nan_mismatches, 0);
  EXPECT_LE(summed.rel_norm, 8e-3);

  // grad_weight and grad_bias: each rank's rows are the single-GPU rows of its shard, with or
  // without the reduction of grad_hidden.
  const auto ref_weight = r0.get<float>("ref_grad_weight");
  const auto ref_bias = r0.get<float>("ref_grad_bias");
  const auto hidden = static_cast<std::size_t>(p.hidden);
  for (const RankOutcome& o : outcomes) {
    const auto start = static_cast<std::size_t>(std::stoll(o.report.text("start")));
    for (const char* prefix : {"reduced_", "partial_"}) {
      const auto weight = o.report.get<float>(std::string(prefix) + "grad_weight");
      const auto bias = o.report.get<float>(std::string(prefix) + "grad_bias");
      const std::vector<float> ref_w(ref_weight.begin() + static_cast<std::ptrdiff_t>(start * hidden),
                                     ref_weight.begin() + static_cast<std::ptrdiff_t>(start * hidden + weight.size()));
      const std::vector<float> ref_b(ref_bias.begin() + static_cast<std::ptrdiff_t>(start),
                                     ref_bias.begin() + static_cast<std::ptrdiff_t>(start + bias.size()));
      const Diff dw = compare(weight, ref_w);
      const Diff db = compare(bias, ref_b);
      EXPECT_EQ(dw.nan_mismatches, 0);
      EXPECT_LE(dw.rel_norm, 4e-3) << "rank " << o.rank << " " << prefix;
      EXPECT_LE(db.rel_norm, 4e-3) << "rank " << o.rank << " " << prefix;
    }
  }
}

}  // namespace
}  // namespace shardjit
