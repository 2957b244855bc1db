// LinearLogp on one GPU captured into a CUDA graph (on a non-blocking stream of its own, after
// the op was built with max_rows and run once eagerly, as docs/deploy.md asks), then replayed
// after every input was overwritten in place with new random values. Each replay must give the
// bits of an eager call on the same inputs (the op is deterministic) and match the fp64 CPU
// reference within the bounds of the forward and backward tests. Outputs are poisoned (NaN)
// before every run, so a result left over from an earlier run cannot pass for a new one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/expect_reference.hpp"
#include "support/grad_reference.hpp"
#include "support/logp_case.hpp"
#include "support/reference.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;
using testing::to_floats;

constexpr int kReplays = 3;

Runtime& shared_runtime() {
  static Runtime runtime;  // cache folder from SHARDJIT_CACHE_DIR, shared across the suite
  return runtime;
}

struct GraphCase : testing::LogpCase {
  bool entropy = false;
  bool backward = false;
  bool grad_weight_fp32 = false;
  std::int64_t dz_tiles = 0;  // backward workspace in 128-column tiles of dZ (several chunks); 0: default
  bool sized_at_build = true;  // max_rows = n; otherwise 0, and the first call allocates
  std::int64_t keep_bytes = -1;  // keep_logits_bytes; < 0: the default
};

// What one run gave, as device bytes.
struct Results {
  std::vector<std::uint8_t> logp, lse, entropy, grad_hidden, grad_weight, grad_bias;
};

// A problem of fixed shape whose inputs are refilled in place (the graph keeps the pointers),
// its device buffers and its op.
class Fixture {
 public:
  explicit Fixture(const GraphCase& c)
      : c_(c),
        n4_(static_cast<std::size_t>(c.n) * 4),
        x_(static_cast<std::size_t>(c.n * c.hidden) * dtype_size(c.dtype)),
        w_(static_cast<std::size_t>(c.vocab * c.hidden) * dtype_size(c.dtype)),
        b_(static_cast<std::size_t>(c.vocab) * 4),
        t_(static_cast<std::size_t>(c.n) * 8),
        g_(n4_),
        h_(n4_),
        logp_(n4_),
        lse_(n4_),
        entropy_(n4_),
        gx_(static_cast<std::size_t>(c.n * c.hidden) * dtype_size(c.dtype)),
        gw_(static_cast<std::size_t>(c.vocab * c.hidden) * dtype_size(grad_dtypes().weight)),
        gb_(static_cast<std::size_t>(c.vocab) * dtype_size(grad_dtypes().bias)),
        op_(shared_runtime(), config()) {}

  const char* main_loop() const { return op_.main_loop(); }
  testing::GradDtypes grad_dtypes() const { return testing::grad_dtypes(c_.dtype, c_.bias, c_.grad_weight_fp32); }

  // New random hidden states, weights, bias, targets and upstream gradients, written over the
  // old ones in the same device buffers.
  void refill(std::uint64_t seed) {
    testing::LogpProblem& p = p_;
    p = testing::logp_problem(c_);
    std::vector<std::uint8_t> bytes;
    p.hidden_values = testing::random_values(seed, static_cast<std::size_t>(c_.n * c_.hidden), 1.0f, c_.dtype, bytes);
    x_.upload(bytes.data(), bytes.size());
    const float w_scale = 4.0f / std::sqrt(static_cast<float>(c_.hidden));
    p.weight_values =
        testing::random_values(seed + 1, static_cast<std::size_t>(c_.vocab * c_.hidden), w_scale, c_.dtype, bytes);
    w_.upload(bytes.data(), bytes.size());
    if (c_.bias) {
      p.bias_values = testing::random_values(seed + 2, static_cast<std::size_t>(c_.vocab), 1.0f, *c_.bias, bytes);
      b_.upload(bytes.data(), bytes.size());
    }
    g_values_.clear();
    h_values_.clear();
    testing::random_targets_and_grads(p, seed + 3, 9, 4, g_values_, h_values_);
    if (c_.targets == DType::kInt32) {
      const std::vector<std::int32_t> t32(p.targets.begin(), p.targets.end());
      t_.upload(t32.data(), t32.size() * 4);
    } else {
      t_.upload(p.targets.data(), p.targets.size() * 8);
    }
    g_.upload(g_values_.data(), n4_);
    h_.upload(h_values_.data(), n4_);
  }

  // Enqueues the op's calls on `stream` (what the graph captures): the forward where
  // with_forward, then the backward where the case has one and with_backward.
  void enqueue(CUstream stream, bool with_backward = true, bool with_forward = true) {
    LinearLogpInputs in;
    in.hidden = {x_.data(), c_.dtype, c_.n, c_.hidden, 0};
    in.weight = {w_.data(), c_.dtype, c_.vocab, c_.hidden, 0};
    if (c_.bias) in.bias = {b_.data(), *c_.bias, c_.vocab};
    in.targets = {t_.data(), c_.targets, c_.n};
    LinearLogpOutputs out;
    out.logp = {logp_.data(), DType::kFP32, c_.n};
    out.lse = {lse_.data(), DType::kFP32, c_.n};
    if (c_.entropy) out.entropy = {entropy_.data(), DType::kFP32, c_.n};
    if (with_forward) op_.forward(in, out, stream);
    if (!c_.backward || !with_backward) return;
    LinearLogpGrads grads;
    grads.hidden = {gx_.data(), c_.dtype, c_.n, c_.hidden, 0};
    grads.weight = {gw_.data(), grad_dtypes().weight, c_.vocab, c_.hidden, 0};
    if (c_.bias) grads.bias = {gb_.data(), grad_dtypes().bias, c_.vocab};
    op_.backward(in, out.lse, {g_.data(), DType::kFP32, c_.n}, {h_.data(), DType::kFP32, c_.n}, grads, stream);
  }

  // An eager call of `rows` rows on the fixture's weights (random hidden states and targets), waited
  // for; its results are not looked at. It sizes the op's buffers for that many rows: a forward
  // without the backward asks for no lse, and so keeps no logits and sizes only the forward's.
  void run_rows(CUstream stream, std::int64_t rows, bool with_backward) {
    std::vector<std::uint8_t> bytes;
    testing::random_values(9000 + static_cast<std::uint64_t>(rows), static_cast<std::size_t>(rows * c_.hidden), 1.0f,
                           c_.dtype, bytes);
    const DeviceArray x = DeviceArray::from(bytes);
    const std::int64_t valid = c_.valid_vocab > 0 ? c_.valid_vocab : c_.vocab;
    std::vector<std::int64_t> ids(static_cast<std::size_t>(rows));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i * 7919) % valid;
    const DeviceArray t = c_.targets == DType::kInt32
                              ? DeviceArray::from(std::vector<std::int32_t>(ids.begin(), ids.end()))
                              : DeviceArray::from(ids);
    const auto floats = [&](float value) { return DeviceArray::from(std::vector<float>(ids.size(), value)); };
    const DeviceArray logp = floats(0.0f), lse = floats(0.0f), g = floats(1.0f), h = floats(0.5f);
    DeviceArray gx(static_cast<std::size_t>(rows * c_.hidden) * dtype_size(c_.dtype));
    LinearLogpInputs in;
    in.hidden = {x.data(), c_.dtype, rows, c_.hidden, 0};
    in.weight = {w_.data(), c_.dtype, c_.vocab, c_.hidden, 0};
    if (c_.bias) in.bias = {b_.data(), *c_.bias, c_.vocab};
    in.targets = {t.data(), c_.targets, rows};
    LinearLogpOutputs out;
    out.logp = {logp.data(), DType::kFP32, rows};
    if (with_backward) out.lse = {lse.data(), DType::kFP32, rows};
    op_.forward(in, out, stream);
    if (with_backward) {
      LinearLogpGrads grads;
      grads.hidden = {gx.data(), c_.dtype, rows, c_.hidden, 0};
      grads.weight = {gw_.data(), grad_dtypes().weight, c_.vocab, c_.hidden, 0};
      if (c_.bias) grads.bias = {gb_.data(), grad_dtypes().bias, c_.vocab};
      op_.backward(in, out.lse, {g.data(), DType::kFP32, rows}, {h.data(), DType::kFP32, rows}, grads, stream);
    }
    EXPECT_EQ(op_.check(stream).bad_rows, 0);  // waits for the stream
  }

  // Poisons the outputs (the gradients only, for a launch that runs only the backward, which reads
  // lse), runs `launch` on `stream`, waits for it and reads the outputs back.
  Results run(CUstream stream, const std::function<void()>& launch, bool backward_only = false) {
    for (DeviceArray* o : {&gx_, &gw_, &gb_}) o->fill_bytes(0xff);
    if (!backward_only) {
      for (DeviceArray* o : {&logp_, &lse_, &entropy_}) o->fill_bytes(0xff);
    }
    launch();
    EXPECT_EQ(op_.check(stream).bad_rows, 0);  // waits for the stream
    Results r;
    r.logp = logp_.to_vector<std::uint8_t>(n4_);
    r.lse = lse_.to_vector<std::uint8_t>(n4_);
    if (c_.entropy) r.entropy = entropy_.to_vector<std::uint8_t>(n4_);
    if (c_.backward) {
      r.grad_hidden = gx_.to_vector<std::uint8_t>(gx_.bytes());
      r.grad_weight = gw_.to_vector<std::uint8_t>(gw_.bytes());
      if (c_.bias) r.grad_bias = gb_.to_vector<std::uint8_t>(gb_.bytes());
    }
    return r;
  }

  void expect_matches_reference(const Results& r) const {
    const auto n = static_cast<std::size_t>(c_.n);
    testing::expect_outputs_match_reference(p_, to_floats(r.logp, DType::kFP32, n), to_floats(r.lse, DType::kFP32, n),
                                            c_.entropy ? to_floats(r.entropy, DType::kFP32, n) : std::vector<float>{},
                                            std::string(c_.name) + " replay");
    if (!c_.backward) return;

    testing::expect_grads_match_reference(p_, g_values_, h_values_, c_.dtype,
                                          {r.grad_hidden, r.grad_weight, c_.bias ? &r.grad_bias : nullptr, grad_dtypes()},
                                          std::string(c_.name) + " replay");
  }

 private:
  LinearLogpConfig config() const {
    LinearLogpConfig config = testing::logp_config(c_);
    config.want_entropy = c_.entropy;
    // Every workspace sized at build, so that nothing is allocated during capture.
    config.max_rows = c_.sized_at_build ? c_.n : 0;
    config.want_backward = c_.backward;
    config.grad_weight_fp32 = c_.grad_weight_fp32;
    // dZ tiles of 128 columns over the rows rounded up to 256, in the dZ dtype (16-bit here).
    if (c_.dz_tiles > 0) config.backward_workspace_bytes = (c_.n + 255) / 256 * 256 * 128 * 2 * c_.dz_tiles;
    if (c_.keep_bytes >= 0) config.keep_logits_bytes = c_.keep_bytes;
    return config;
  }

  GraphCase c_;
  std::size_t n4_;
  testing::LogpProblem p_;
  std::vector<float> g_values_, h_values_;
  DeviceArray x_, w_, b_, t_, g_, h_, logp_, lse_, entropy_, gx_, gw_, gb_;
  LinearLogp op_;
};

class GraphCaptureTest : public ::testing::TestWithParam<GraphCase> {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

// Driver calls of the test itself, checked.
#define TEST_CU(call) ::shardjit::check_cu(::shardjit::driver().call, #call)

// A captured graph and its executable, destroyed with the scope.
class CapturedGraph {
 public:
  CapturedGraph(CUstream stream, const std::function<void()>& enqueue) {
    TEST_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    try {
      enqueue();
    } catch (...) {
      CUgraph broken = nullptr;
      driver().cuStreamEndCapture(stream, &broken);  // leave the stream usable
      if (broken != nullptr) driver().cuGraphDestroy(broken);
      throw;
    }
    TEST_CU(cuStreamEndCapture(stream, &graph_));
    TEST_CU(cuGraphInstantiateWithFlags(&exec_, graph_, 0));
  }
  ~CapturedGraph() {
    if (exec_ != nullptr) driver().cuGraphExecDestroy(exec_);
    if (graph_ != nullptr) driver().cuGraphDestroy(graph_);
  }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch(CUstream stream) const { TEST_CU(cuGraphLaunch(exec_, stream)); }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

TEST_P(GraphCaptureTest, ReplaysGiveTheEagerBitsAndTheReference) {
  const GraphCase& c = GetParam();
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  OwnedStream stream(device);  // non-blocking: capture never involves the legacy stream
  Fixture f(c);

  // One eager call first, on the inputs the graph is captured with.
  f.refill(7000);
  f.run(stream.get(), [&] { f.enqueue(stream.get()); });
  const CapturedGraph graph(stream.get(), [&] { f.enqueue(stream.get()); });

  for (int replay = 0; replay < kReplays; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    f.refill(7100 + 10 * static_cast<std::uint64_t>(replay));  // the stream is idle: run() waited
    const Results replayed = f.run(stream.get(), [&] { graph.launch(stream.get()); });
    const Results eager = f.run(stream.get(), [&] { f.enqueue(stream.get()); });
    EXPECT_EQ(replayed.logp, eager.logp) << "logp of the replay differs from the eager call";
    EXPECT_EQ(replayed.lse, eager.lse) << "lse of the replay differs from the eager call";
    EXPECT_EQ(replayed.entropy, eager.entropy) << "entropy of the replay differs from the eager call";
    EXPECT_EQ(replayed.grad_hidden, eager.grad_hidden) << "grad_hidden of the replay differs from the eager call";
    EXPECT_EQ(replayed.grad_weight, eager.grad_weight) << "grad_weight of the replay differs from the eager call";
    EXPECT_EQ(replayed.grad_bias, eager.grad_bias) << "grad_bias of the replay differs from the eager call";
    f.expect_matches_reference(replayed);
  }
}

const GraphCase kCases[] = {
    // Forward only: several vocabulary splits (few rows, a large vocabulary), bias, entropy.
    {"fwd_n257_h512_v20000_pad", 257, 512, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f, true},
    // Forward + backward over several dZ chunks (fp32 grad_hidden accumulator), fp32 grad_weight.
    {"fwd_bwd_n200_h256_v12000_chunks", 200, 256, 12000, 0, DType::kBF16, DType::kFP32, DType::kInt32, 1.0f, true,
     true, true, 16},
    // fp16: dZ scaled by a power of two chosen on the device, inside the graph.
    {"fwd_bwd_n129_h128_v3001_fp16", 129, 128, 3001, 2990, DType::kFP16, std::nullopt, DType::kInt64, 1.1f, false,
     true},
    // Forward only, a small shard at few rows (a block a tile), sized at build or by the eager call.
    {"fwd_n7_h1024_v16032_small_shard", 7, 1024, 16032, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true},
    {"fwd_n100_h512_v38016_small_shard_grown", 100, 512, 38016, 37990, DType::kFP16, DType::kFP32, DType::kInt32, 0.8f,
     false, false, false, 0, false},
};

INSTANTIATE_TEST_SUITE_P(Shapes, GraphCaptureTest, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// Runs `enqueue` inside a capture of `stream`, expecting it to be refused with kInvalidArgument;
// returns the error's message, and in *nodes the nodes of the ended capture.
std::string refused_capture(CUstream stream, const std::function<void()>& enqueue, std::size_t* nodes) {
  TEST_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  std::string message;
  try {
    enqueue();
    ADD_FAILURE() << "a call that cannot be captured was accepted during capture";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    message = e.what();
  }
  CUgraph graph = nullptr;
  TEST_CU(cuStreamEndCapture(stream, &graph));
  *nodes = 0;
  TEST_CU(cuGraphGetNodes(graph, nullptr, nodes));
  TEST_CU(cuGraphDestroy(graph));
  return message;
}

// The first vocabulary chunk an eager forward kept is not used by a backward captured after it:
// the graph's replays would follow whatever forward ran last, not that one. The replay gives the
// bits of an eager backward that recomputes every chunk (the second of two after one forward).
// Forward and backward captured together use it, as ReplaysGiveTheEagerBitsAndTheReference's
// chunked case shows.
TEST(GraphCaptureKeptChunk, ABackwardCapturedApartFromItsForwardRecomputes) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  const GraphCase& c = kCases[1];  // several dZ chunks
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  OwnedStream stream(device);
  const CUstream s = stream.get();
  Fixture f(c);
  f.refill(7200);
  const Results kept = f.run(s, [&] { f.enqueue(s); });
  const Results recomputed = f.run(s, [&] { f.enqueue(s, true, false); }, true);
  f.run(s, [&] { f.enqueue(s, false); });  // a forward that keeps the chunk again
  const CapturedGraph graph(s, [&] { f.enqueue(s, true, false); });
  const Results replayed = f.run(s, [&] { graph.launch(s); }, true);
  EXPECT_EQ(replayed.grad_hidden, recomputed.grad_hidden) << "the captured backward used the eager forward's chunk";
  EXPECT_EQ(replayed.grad_weight, recomputed.grad_weight);
  EXPECT_EQ(replayed.grad_bias, recomputed.grad_bias);
  f.expect_matches_reference(replayed);
  // Where the op keeps a chunk (the Hopper loop), the kept logits went through fp16: other bits.
  if (std::string(f.main_loop()) == "wgmma") {
    EXPECT_NE(kept.grad_hidden, recomputed.grad_hidden) << "the eager backward did not use the kept chunk";
  }
}

// A capture at a row count whose whole shard would be one chunk (it fits the dZ and keep budgets
// together) after eager calls that left a dZ buffer too small for it (the larger call's chunks
// cut to the dZ budget): the capture grows nothing. Its forward keeps no logits, its backward
// goes by budget-sized chunks (LinearLogpBwdState::chunks_on), and every replay matches the
// reference. An op without max_rows, so that the eager calls size the buffers. (Off Hopper the
// forward keeps nothing and no shard is one chunk: the capture is plain budget chunks.)
TEST(GraphCaptureWholeShard, ACaptureAfterLargerCallsGoesByBudgetChunks) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  GraphCase c{"whole_n200_h256_v12000", 200, 256, 12000, 11990, DType::kBF16, std::nullopt, DType::kInt64, 1.0f,
              false, true};
  c.sized_at_build = false;
  c.dz_tiles = 16;         // 1 MiB of dZ: 256 columns a chunk at 2048 rows
  c.keep_bytes = 8 << 20;  // with it, 200 rows' whole shard (4.6 MiB of dZ) is one chunk; 2048 rows' (47 MiB) is not
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  OwnedStream stream(device);
  const CUstream s = stream.get();
  Fixture f(c);
  f.refill(7400);
  f.run_rows(s, c.n, false);  // the forward's workspace for c.n rows
  f.run_rows(s, 2048, true);  // the backward's buffers, the dZ buffer at its budget
  const CapturedGraph graph(s, [&] { f.enqueue(s); });
  for (int replay = 0; replay < kReplays; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    f.refill(7500 + 10 * static_cast<std::uint64_t>(replay));
    f.expect_matches_reference(f.run(s, [&] { graph.launch(s); }));
  }
}

// Without max_rows a first call inside a capture would have to allocate: refused with an error
// that names the remedy, before the refused call enqueues anything, so that the capture ends
// clean and the stream stays usable (the eager call after it matches the reference). First the
// forward's workspace, then, after an eager forward, the backward's buffers. fp32, whose forward
// keeps no logits for the backward: a forward that keeps them sizes the backward's buffers.
TEST(GraphCaptureGrowthTest, GrowthDuringCaptureIsRefusedByName) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  GraphCase c{"grow_n300_h128_v5000", 300, 128, 5000, 0, DType::kFP32, std::nullopt, DType::kInt64, 1.0f, false, true};
  c.sized_at_build = false;
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  OwnedStream stream(device);
  Fixture f(c);
  f.refill(7300);
  std::size_t nodes = 0;
  std::string message = refused_capture(stream.get(), [&] { f.enqueue(stream.get()); }, &nodes);
  EXPECT_NE(message.find("partials workspace"), std::string::npos) << message;
  EXPECT_NE(message.find("max_rows"), std::string::npos) << message;
  EXPECT_EQ(nodes, 0u) << "the refused forward enqueued work";

  f.run(stream.get(), [&] { f.enqueue(stream.get(), false); });
  message = refused_capture(stream.get(), [&] { f.enqueue(stream.get()); }, &nodes);
  EXPECT_NE(message.find("LinearLogp backward"), std::string::npos) << message;
  EXPECT_NE(message.find("max_rows"), std::string::npos) << message;

  f.expect_matches_reference(f.run(stream.get(), [&] { f.enqueue(stream.get()); }));
}

// A call that waits for the stream on the host cannot be captured: a strict forward (it reads the
// bad-target record after the kernels) and check() are refused by name before they enqueue
// anything, so that the capture ends clean; outside a capture both run.
TEST(GraphCaptureHostWaits, StrictForwardAndCheckAreRefusedByName) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  constexpr std::int64_t kRows = 4, kHidden = 64, kVocab = 300;
  LinearLogpConfig config;
  config.hidden = kHidden;
  config.vocab_local = kVocab;
  config.strict = true;
  config.max_rows = kRows;
  LinearLogp op(shared_runtime(), config);
  std::vector<std::uint8_t> x_bytes, w_bytes;
  testing::random_values(31, kRows * kHidden, 1.0f, DType::kBF16, x_bytes);
  testing::random_values(32, kVocab * kHidden, 0.5f, DType::kBF16, w_bytes);
  const DeviceArray x = DeviceArray::from(x_bytes), w = DeviceArray::from(w_bytes);
  const DeviceArray t = DeviceArray::from(std::vector<std::int64_t>{1, 2, 299, 0});
  DeviceArray logp(kRows * 4);
  const LinearLogpInputs in{{x.data(), DType::kBF16, kRows, kHidden, 0},
                            {w.data(), DType::kBF16, kVocab, kHidden, 0},
                            {},
                            {t.data(), DType::kInt64, kRows}};
  const LinearLogpOutputs out{{logp.data(), DType::kFP32, kRows}, {}, {}};
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  OwnedStream stream(device);
  const CUstream s = stream.get();

  std::size_t nodes = 0;
  std::string message = refused_capture(s, [&] { op.forward(in, out, s); }, &nodes);
  EXPECT_NE(message.find("strict = true"), std::string::npos) << message;
  EXPECT_NE(message.find("being captured"), std::string::npos) << message;
  EXPECT_EQ(nodes, 0u) << "the refused forward enqueued work";
  message = refused_capture(s, [&] { op.check(s); }, &nodes);
  EXPECT_NE(message.find("LinearLogp::check waits for the stream"), std::string::npos) << message;
  EXPECT_EQ(nodes, 0u) << "the refused check enqueued work";

  op.forward(in, out, s);
  EXPECT_EQ(op.check(s).bad_rows, 0);
  for (float value : logp.to_vector<float>(kRows)) EXPECT_TRUE(std::isfinite(value) && value < 0.0f) << value;
}

}  // namespace
}  // namespace shardjit
