// TP=2 LinearLogp backward against the single-GPU backward over the whole vocabulary:
// grad_hidden is all-reduced (bitwise the same on every rank), grad_weight and grad_bias of each
// rank are the rows of its shard.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"

#include "tp_problem.hpp"

namespace shardjit {
namespace {

using namespace testing;

struct Grads {
  Grads(const TpProblem& p, Shard shard, const DeviceContext& device)
      : hidden(static_cast<std::size_t>(p.n * p.hidden) * 2, device),
        weight(static_cast<std::size_t>(shard.size * p.hidden) * 4, device),
        bias(static_cast<std::size_t>(shard.size) * 4, device),
        rows(p.n),
        cols(p.hidden),
        vocab(shard.size) {}

  LinearLogpGrads views() const {
    LinearLogpGrads g;
    g.hidden = {hidden.data(), DType::kBF16, rows, cols, 0};
    g.weight = {weight.data(), DType::kFP32, vocab, cols, 0};
    g.bias = {bias.data(), DType::kFP32, vocab};
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

LinearLogpConfig backward_config(const TpProblem& p, Shard shard, int device) {
  LinearLogpConfig c = config_for(p, shard, device);
  c.want_backward = true;
  c.grad_weight_fp32 = true;
  return c;
}

// Enqueues forward then backward of `op` on `tensors` on `stream`.
void enqueue_forward_backward(LinearLogp& op, const RankTensors& tensors, const DeviceArray& grad_logp,
                              const DeviceArray& grad_lse, const Grads& grads, CUstream stream) {
  const std::int64_t n = tensors.problem.n;
  op.forward(tensors.inputs(), tensors.outputs(), stream);
  op.backward(tensors.inputs(), {tensors.lse.data(), DType::kFP32, n}, {grad_logp.data(), DType::kFP32, n},
              {grad_lse.data(), DType::kFP32, n}, grads.views(), stream);
}

// Forward then backward of `op` on `tensors`, gradients reported under `prefix`.
void forward_backward(LinearLogp& op, RankTensors& tensors, const DeviceArray& grad_logp, const DeviceArray& grad_lse,
                      const Grads& grads, RankReport& report, const std::string& prefix) {
  tensors.poison();
  enqueue_forward_backward(op, tensors, grad_logp, grad_lse, grads, nullptr);
  op.check(nullptr);
  grads.report(report, prefix);
}

TEST(TpBackward, EqualsTheSingleGpuBackward) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = uneven_problem();  // shards of 384 and 616 rows, 10 of padding
  auto targets = make_targets(p);
  for (std::size_t i = 9; i < targets.size(); i += 11) targets[i] = -100;  // no gradient from these rows
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    auto upstream = [&](std::uint64_t seed, float scale) {
      std::vector<std::uint8_t> bytes = random_bytes(seed, 0, p.n, scale, DType::kFP32);
      return DeviceArray::from(bytes, device);
    };
    const DeviceArray grad_logp = upstream(p.seed + 10, 1.0f);
    const DeviceArray grad_lse = upstream(p.seed + 11, 0.25f);

    RankTensors tensors(p, shard, targets, device);
    Grads grads(p, shard, device);
    LinearLogp op(runtime, backward_config(p, shard, ctx.rank), comm);
    forward_backward(op, tensors, grad_logp, grad_lse, grads, ctx.report, "tp_");
    ctx.report.put_text("start", std::to_string(shard.start));

    if (ctx.rank == 0) {
      RankTensors full(p, full_vocab(p), targets, device);
      Grads full_grads(p, full_vocab(p), device);
      LinearLogp single(runtime, backward_config(p, full_vocab(p), ctx.rank));
      forward_backward(single, full, grad_logp, grad_lse, full_grads, ctx.report, "ref_");
    }
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;

  const RankReport& r0 = outcomes[0].report;
  // grad_hidden: the same bits on every rank, and the single-GPU value up to the rounding of the
  // two fp32 partials' sum to bf16 (a bf16 step here and there). A missing or doubled shard
  // would be off by the order of the values themselves.
  const auto ref_hidden = bf16_values(r0.get<std::uint16_t>("ref_grad_hidden"));
  const double hidden_scale = max_abs_of(ref_hidden);
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.report.bytes("tp_grad_hidden"), r0.bytes("tp_grad_hidden")) << "rank " << o.rank;
  }
  const Diff dh = compare(bf16_values(r0.get<std::uint16_t>("tp_grad_hidden")), ref_hidden);
  std::printf("[ accuracy ] tp vs single-GPU grad_hidden max|d| %.3e (scale %.3e) rel-norm %.3e\n", dh.max_abs,
              hidden_scale, dh.rel_norm);
  EXPECT_GT(hidden_scale, 0.0);
  EXPECT_EQ(dh.nan_mismatches, 0);
  EXPECT_LE(dh.max_abs, hidden_scale / 64);
  EXPECT_LE(dh.rel_norm, 4e-3);

  // grad_weight and grad_bias: each rank's rows are the single-GPU rows of its shard.
  const auto ref_weight = r0.get<float>("ref_grad_weight");
  const auto ref_bias = r0.get<float>("ref_grad_bias");
  const auto hidden = static_cast<std::size_t>(p.hidden);
  for (const RankOutcome& o : outcomes) {
    const auto start = static_cast<std::size_t>(std::stoll(o.report.text("start")));
    const auto weight = o.report.get<float>("tp_grad_weight");
    const auto bias = o.report.get<float>("tp_grad_bias");
    const std::vector<float> ref_w(ref_weight.begin() + static_cast<std::ptrdiff_t>(start * hidden),
                                   ref_weight.begin() + static_cast<std::ptrdiff_t>(start * hidden + weight.size()));
    const std::vector<float> ref_b(ref_bias.begin() + static_cast<std::ptrdiff_t>(start),
                                   ref_bias.begin() + static_cast<std::ptrdiff_t>(start + bias.size()));
    const Diff dw = compare(weight, ref_w);
    const Diff db = compare(bias, ref_b);
    std::printf("[ accuracy ] rank %d grad_weight max|d| %.3e rel-norm %.3e; grad_bias max|d| %.3e rel-norm %.3e\n",
                o.rank, dw.max_abs, dw.rel_norm, db.max_abs, db.rel_norm);
    EXPECT_EQ(dw.nan_mismatches, 0);
    EXPECT_LE(dw.max_abs, max_abs_of(ref_w) / 64) << "rank " << o.rank;
    EXPECT_LE(dw.rel_norm, 4e-3) << "rank " << o.rank;
    EXPECT_LE(db.max_abs, max_abs_of(ref_b) / 64 + 1e-7) << "rank " << o.rank;
    EXPECT_LE(db.rel_norm, 4e-3) << "rank " << o.rank;
  }
}

TEST(TpBackward, GraphOfForwardAndBackwardReplaysTheEagerResult) {
  SHARDJIT_REQUIRE_GPUS(2);
  const TpProblem p = uneven_problem();
  const auto targets = make_targets(p);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    const Shard shard = shard_of(p, ctx.rank, ctx.size);
    const DeviceArray grad_logp = DeviceArray::from(random_bytes(p.seed + 10, 0, p.n, 1.0f, DType::kFP32), device);
    const DeviceArray grad_lse = DeviceArray::from(random_bytes(p.seed + 11, 0, p.n, 0.25f, DType::kFP32), device);
    RankTensors tensors(p, shard, targets, device);
    Grads grads(p, shard, device);
    LinearLogpConfig config = backward_config(p, shard, ctx.rank);
    config.max_rows = p.n;  // every workspace sized at build: nothing is allocated during capture
    LinearLogp op(runtime, config, comm);
    OwnedStream stream(device);
    ScopedContext scope(device);

    auto run_and_report = [&](const std::string& prefix, const std::function<void()>& enqueue) {
      tensors.poison();
      for (DeviceArray* g : {&grads.hidden, &grads.weight, &grads.bias}) g->fill_bytes(0xff);
      enqueue();
      op.check(stream.get());
      tensors.report(ctx.report, prefix);
      grads.report(ctx.report, prefix);
    };
    run_and_report("eager_", [&] { enqueue_forward_backward(op, tensors, grad_logp, grad_lse, grads, stream.get()); });

    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    SHARDJIT_CU(cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    enqueue_forward_backward(op, tensors, grad_logp, grad_lse, grads, stream.get());
    SHARDJIT_CU(cuStreamEndCapture(stream.get(), &graph));
    SHARDJIT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    run_and_report("replay_", [&] { SHARDJIT_CU(cuGraphLaunch(exec, stream.get())); });
    SHARDJIT_CU(cuGraphExecDestroy(exec));
    SHARDJIT_CU(cuGraphDestroy(graph));
  });
  expect_all_ok(outcomes);
  for (const RankOutcome& o : outcomes) {
    for (const char* name : {"logp", "lse", "grad_hidden", "grad_weight", "grad_bias"}) {
      EXPECT_EQ(o.report.bytes(std::string("replay_") + name), o.report.bytes(std::string("eager_") + name))
          << "rank " << o.rank << ": " << name << " of the replayed graph differs from the eager run";
    }
  }
}

}  // namespace
}  // namespace shardjit
