// One Runtime shared by 8 threads, as a server shares it between its workers: every thread builds
// its own LinearLogp op at the same moment (three threads share one config, two share another,
// so the first use of one kernel happens on several threads at once while other kernels compile
// alongside), then runs a forward and a backward on a stream of its own, on fresh random data.
// Every thread's results must equal, bit for bit, a later single-threaded run of the same op on
// the same inputs, and match the fp64 CPU reference; every kernel that compiles (those not built
// with the library) must have been compiled once.
#include <gtest/gtest.h>

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/logging.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/expect_reference.hpp"
#include "support/grad_reference.hpp"
#include "support/logp_case.hpp"
#include "support/reference.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;
using testing::to_floats;

struct ThreadCase : testing::LogpCase {
  bool entropy = false;
  bool grad_weight_fp32 = false;
};

// Threads a0..a2 and b0..b1 share a config each (the same kernels); the others differ in hidden
// size, vocabulary and dtype. Row counts differ everywhere.
const ThreadCase kThreads[] = {
    {"a0", 200, 256, 5000, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true, true},
    {"a1", 77, 256, 5000, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true, true},
    {"a2", 513, 256, 5000, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true, true},
    {"b0", 129, 512, 3001, 2990, DType::kFP16, DType::kFP16, DType::kInt32, 0.8f},
    {"b1", 64, 512, 3001, 2990, DType::kFP16, DType::kFP16, DType::kInt32, 0.8f},
    {"c0", 300, 128, 32000, 0, DType::kBF16, DType::kFP32, DType::kInt64, 1.0f, true, true},
    {"c1", 1000, 1024, 2048, 0, DType::kBF16, std::nullopt, DType::kInt32, 1.2f},
    {"d0", 33, 72, 300, 0, DType::kFP32, DType::kFP32, DType::kInt64, 1.3f, true},
};
constexpr std::size_t kThreadCount = sizeof(kThreads) / sizeof(kThreads[0]);

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// What one forward + backward gave: fp32 logp, lse, entropy and the gradients' device bytes.
struct Results {
  std::vector<float> logp, lse, entropy;
  std::vector<std::uint8_t> grad_hidden, grad_weight, grad_bias;
  std::int64_t bad_rows = -1;
};

// One thread's problem, its device buffers and its op.
struct Worker {
  Worker(const ThreadCase& tc, std::uint64_t seed) : c(tc) {
    p = testing::logp_problem(c);
    p.hidden_values = testing::random_values(seed, static_cast<std::size_t>(c.n * c.hidden), 1.0f, c.dtype, x_bytes);
    const float w_scale = 4.0f / std::sqrt(static_cast<float>(c.hidden));
    p.weight_values =
        testing::random_values(seed + 1, static_cast<std::size_t>(c.vocab * c.hidden), w_scale, c.dtype, w_bytes);
    if (c.bias) p.bias_values = testing::random_values(seed + 2, static_cast<std::size_t>(c.vocab), 1.0f, *c.bias, b_bytes);
    testing::random_targets_and_grads(p, seed + 3, 7, 3, g, h);
  }

  testing::GradDtypes grad_dtypes() const { return testing::grad_dtypes(c.dtype, c.bias, c.grad_weight_fp32); }

  LinearLogpConfig config() const {
    LinearLogpConfig config = testing::logp_config(c);
    config.want_entropy = c.entropy;
    config.want_backward = true;
    config.grad_weight_fp32 = c.grad_weight_fp32;
    return config;
  }

  // Device buffers with this worker's inputs (made on the worker's thread).
  void upload() {
    const std::size_t n4 = static_cast<std::size_t>(c.n) * 4;
    x = std::make_unique<DeviceArray>(x_bytes.size());
    w = std::make_unique<DeviceArray>(w_bytes.size());
    b = std::make_unique<DeviceArray>(std::max<std::size_t>(b_bytes.size(), 16));
    x->upload(x_bytes.data(), x_bytes.size());
    w->upload(w_bytes.data(), w_bytes.size());
    b->upload(b_bytes.data(), b_bytes.size());
    const std::vector<std::int32_t> t32(p.targets.begin(), p.targets.end());
    t = std::make_unique<DeviceArray>(c.targets == DType::kInt32 ? DeviceArray::from(t32) : DeviceArray::from(p.targets));
    gl = std::make_unique<DeviceArray>(DeviceArray::from(g));
    hl = std::make_unique<DeviceArray>(DeviceArray::from(h));
    logp = std::make_unique<DeviceArray>(n4);
    lse = std::make_unique<DeviceArray>(n4);
    entropy = std::make_unique<DeviceArray>(n4);
    const auto H = static_cast<std::size_t>(c.hidden), V = static_cast<std::size_t>(c.vocab);
    gx = std::make_unique<DeviceArray>(static_cast<std::size_t>(c.n) * H * dtype_size(c.dtype));
    gw = std::make_unique<DeviceArray>(V * H * dtype_size(grad_dtypes().weight));
    gb = std::make_unique<DeviceArray>(V * dtype_size(grad_dtypes().bias));
  }

  // The op's inputs: this worker's device buffers (upload).
  LinearLogpInputs inputs() const {
    LinearLogpInputs in;
    in.hidden = {x->data(), c.dtype, c.n, c.hidden, 0};
    in.weight = {w->data(), c.dtype, c.vocab, c.hidden, 0};
    if (c.bias) in.bias = {b->data(), *c.bias, c.vocab};
    in.targets = {t->data(), c.targets, c.n};
    return in;
  }

  // Forward then backward on `stream`, outputs poisoned first; waits and downloads.
  Results run(CUstream stream) {
    for (DeviceArray* o : {logp.get(), lse.get(), entropy.get(), gx.get(), gw.get(), gb.get()}) o->fill_bytes(0xff);
    const LinearLogpInputs in = inputs();
    LinearLogpOutputs out;
    out.logp = {logp->data(), DType::kFP32, c.n};
    out.lse = {lse->data(), DType::kFP32, c.n};
    if (c.entropy) out.entropy = {entropy->data(), DType::kFP32, c.n};
    op->forward(in, out, stream);
    LinearLogpGrads grads;
    grads.hidden = {gx->data(), c.dtype, c.n, c.hidden, 0};
    grads.weight = {gw->data(), grad_dtypes().weight, c.vocab, c.hidden, 0};
    if (c.bias) grads.bias = {gb->data(), grad_dtypes().bias, c.vocab};
    op->backward(in, out.lse, {gl->data(), DType::kFP32, c.n}, {hl->data(), DType::kFP32, c.n}, grads, stream);
    Results r;
    r.bad_rows = op->check(stream).bad_rows;  // waits for the stream
    const auto n = static_cast<std::size_t>(c.n);
    r.logp = logp->to_vector<float>(n);
    r.lse = lse->to_vector<float>(n);
    if (c.entropy) r.entropy = entropy->to_vector<float>(n);
    r.grad_hidden = gx->to_vector<std::uint8_t>(gx->bytes());
    r.grad_weight = gw->to_vector<std::uint8_t>(gw->bytes());
    if (c.bias) r.grad_bias = gb->to_vector<std::uint8_t>(gb->bytes());
    return r;
  }

  ThreadCase c;
  testing::LogpProblem p;
  std::vector<float> g, h;
  std::vector<std::uint8_t> x_bytes, w_bytes, b_bytes;
  std::unique_ptr<DeviceArray> x, w, b, t, gl, hl, logp, lse, entropy, gx, gw, gb;
  std::unique_ptr<LinearLogp> op;
  Results concurrent;
  std::string error;  // what a thread threw
};

// Records the messages of the "shardjit" logger while it lives (the kernel cache logs one
// "compiled <spec> for <arch> (...)" line per NVRTC compile, at info level).
class CompileLog {
 public:
  CompileLog() : saved_level_(log().level()), sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_)) {
    sink_->set_pattern("%v");
    log().sinks().push_back(sink_);
  }
  ~CompileLog() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    log().set_level(saved_level_);
  }
  CompileLog(const CompileLog&) = delete;
  CompileLog& operator=(const CompileLog&) = delete;

  // How many times each kernel (spec text and arch) was compiled.
  std::map<std::string, int> compiles() const {
    std::map<std::string, int> counts;
    std::istringstream lines(stream_.str());
    for (std::string line; std::getline(lines, line);) {
      const std::string prefix = "compiled ";
      if (line.rfind(prefix, 0) != 0) continue;
      const std::size_t paren = line.rfind(" (");
      ++counts[line.substr(prefix.size(), paren == std::string::npos ? std::string::npos : paren - prefix.size())];
    }
    return counts;
  }

 private:
  spdlog::level::level_enum saved_level_;
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

void expect_forward_matches_reference(const Worker& wk, const Results& r) {
  testing::expect_outputs_match_reference(wk.p, r.logp, r.lse, wk.c.entropy ? r.entropy : std::vector<float>{},
                                          std::string(wk.c.name) + " " + dtype_name(wk.c.dtype) + " n " +
                                              std::to_string(wk.c.n));
}

void expect_gradients_match_reference(const Worker& wk, const Results& r) {
  testing::expect_grads_match_reference(wk.p, wk.g, wk.h, wk.c.dtype,
                                        {r.grad_hidden, r.grad_weight, wk.c.bias ? &r.grad_bias : nullptr, wk.grad_dtypes()},
                                        std::string(wk.c.name) + " " + dtype_name(wk.c.dtype));
}

TEST(Concurrency, EightThreadsShareOneRuntimeAndGetTheSingleThreadResults) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  testing::TempDir dir;
  CompileLog compile_log;  // before the Runtime, whose log level it restores at the end
  RuntimeOptions options;
  // Empty: every kernel not built with the library is compiled here (on sm_90a c0's fp32-bias
  // kernels and d0's fp32 forward; everywhere, where the library has no prebuilt table).
  options.cache_dir = (dir.path() / "cache").string();
  options.jit = true;
  options.log_level = "info";
  Runtime runtime(options);

  std::vector<std::unique_ptr<Worker>> workers;
  for (std::size_t i = 0; i < kThreadCount; ++i) {
    workers.push_back(std::make_unique<Worker>(kThreads[i], 5000 + 97 * i));
  }

  std::latch start(static_cast<std::ptrdiff_t>(kThreadCount));
  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([&start, &runtime, &wk = *worker] {
      bool arrived = false;
      try {
        const DeviceContext& device = testing::test_device();
        ScopedContext scope(device);
        OwnedStream stream(device);
        wk.upload();
        start.arrive_and_wait();  // every thread builds its op at the same moment
        arrived = true;
        wk.op = std::make_unique<LinearLogp>(runtime, wk.config());
        wk.concurrent = wk.run(stream.get());
      } catch (const std::exception& e) {
        wk.error = e.what();
        if (!arrived) start.count_down();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& wk : workers) {
    ASSERT_EQ(wk->error, "") << wk->c.name;
  }

  // Concurrent first use of a kernel compiled it once; several kernels were compiled.
  const std::map<std::string, int> compiles = compile_log.compiles();
  for (const auto& [kernel, count] : compiles) {
    EXPECT_EQ(count, 1) << kernel << " was compiled " << count << " times";
  }
  EXPECT_GE(compiles.size(), 3u) << "expected at least c0's forward and dZ kernels (fp32 bias) and d0's forward";

  // Single-threaded, on the default stream: the same bits.
  for (const auto& wk : workers) {
    SCOPED_TRACE(wk->c.name);
    const Results serial = wk->run(nullptr);
    const Results& r = wk->concurrent;
    EXPECT_EQ(r.bad_rows, 0);
    EXPECT_EQ(serial.bad_rows, 0);
    EXPECT_TRUE(same_bits(r.logp, serial.logp)) << "logp differs from the single-threaded run";
    EXPECT_TRUE(same_bits(r.lse, serial.lse)) << "lse differs from the single-threaded run";
    EXPECT_TRUE(same_bits(r.entropy, serial.entropy)) << "entropy differs from the single-threaded run";
    EXPECT_EQ(r.grad_hidden, serial.grad_hidden) << "grad_hidden differs from the single-threaded run";
    EXPECT_EQ(r.grad_weight, serial.grad_weight) << "grad_weight differs from the single-threaded run";
    EXPECT_EQ(r.grad_bias, serial.grad_bias) << "grad_bias differs from the single-threaded run";
    expect_forward_matches_reference(*wk, r);
    expect_gradients_match_reference(*wk, r);
  }
}


// Blocks the stream it is enqueued on until its promise is kept.
void CUDA_CB wait_for_release(void* released) {
  static_cast<std::shared_future<void>*>(released)->wait();
}

// An op takes one call at a time: while one thread is inside op.check() (waiting for a stream
// that a host function holds), a forward from another thread is refused with a clear error
// instead of racing on the op's workspace and status word; once the call ends, it runs.
TEST(Concurrency, AnOpInACallRefusesASecondThread) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  Runtime runtime;
  Worker wk(kThreads[1], 777);
  const DeviceContext& device = testing::test_device();
  ScopedContext scope(device);
  wk.upload();
  wk.op = std::make_unique<LinearLogp>(runtime, wk.config());
  const LinearLogpInputs in = wk.inputs();
  LinearLogpOutputs out;
  out.logp = {wk.logp->data(), DType::kFP32, wk.c.n};
  // Both forms of call below size the op's buffers here: none of them may allocate while the
  // stream is held (a free waits for the device). A forward without lse keeps nothing and may
  // write more partials than a training call's.
  wk.run(nullptr);
  wk.op->forward(in, out, nullptr);
  OwnedStream held(device);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_EQ(driver().cuLaunchHostFunc(held.get(), wait_for_release, &released), CUDA_SUCCESS);
  auto checking = std::async(std::launch::async, [&] {
    ScopedContext thread_scope(device);
    for (;;) {  // this thread may itself find the main thread's forward inside the op: retry
      try {
        return wk.op->check(held.get()).bad_rows;
      } catch (const Error& error) {
        if (std::string(error.what()).find("another thread") == std::string::npos) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  });

  // Until the other thread is inside check(), a forward runs; then it must be refused.
  std::string refusal;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (refusal.empty() && std::chrono::steady_clock::now() < give_up) {
    try {
      wk.op->forward(in, out, nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      refusal = error.what();
    }
  }
  release.set_value();
  EXPECT_EQ(checking.get(), 0);
  EXPECT_NE(refusal.find("LinearLogp::forward: another thread is inside a call of this op"), std::string::npos)
      << "refusal: '" << refusal << "'";
  // The op is usable again, and still right.
  const Results r = wk.run(nullptr);
  EXPECT_EQ(r.bad_rows, 0);
  expect_forward_matches_reference(wk, r);
}

}  // namespace
}  // namespace shardjit
