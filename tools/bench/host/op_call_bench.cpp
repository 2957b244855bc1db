// Host time of one LinearLogp::forward call with its kernels loaded: the CPU time to check the
// views, plan the call and enqueue its two kernels on the caller's stream (the kernels really
// run). Beside it, the driver's own share: two bare cuLaunchKernel calls of an empty kernel on
// the same stream. Goal: the op adds at most 1 microsecond to the driver's launches. And a
// training step's: the forward (writing lse) and the backward of an op built for it, whose
// difference from the forward alone is the backward's host time (the host part of a decode
// step through PyTorch, where the GPU waits for it).
//
// The stream is drained (untimed) every kBatch calls so that the launch queue never fills, which
// would make a launch wait for the GPU. A tiny shape keeps the GPU ahead of the host; the host
// path does not depend on the shape. Needs a GPU; skips without one.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/compile/nvrtc_compiler.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

constexpr std::int64_t kBatch = 128;  // calls between drains: 256 launches, well inside the queue
constexpr std::int64_t kStepBatch = 16;  // training steps between drains: ~10 launches a step
constexpr std::int64_t kRows = 16, kHidden = 64, kVocab = 300;

bool skip_without_gpu(benchmark::State& state) {
  if (device_count() > 0) return false;
  state.SkipWithError(driver_available() ? "needs a GPU: the CUDA driver reports none"
                                         : "needs a GPU: no CUDA driver on this machine");
  return true;
}

void skip_with(benchmark::State& state, const std::exception& e) {
  static std::string message;
  message = e.what();
  state.SkipWithError(message.c_str());
}

// Drains `stream` every `batch` iterations, with the timer stopped.
void drain_every_batch(benchmark::State& state, std::int64_t& pending, CUstream stream, std::int64_t batch = kBatch) {
  if (++pending < batch) return;
  state.PauseTiming();
  SHARDJIT_CU(cuStreamSynchronize(stream));
  pending = 0;
  state.ResumeTiming();
}

// Device buffers of a forward: inputs filled with nonzero values, valid target ids.
struct ForwardBuffers {
  explicit ForwardBuffers(const DeviceContext& device)
      : hidden(device, kRows * kHidden * 2),
        weight(device, kVocab * kHidden * 2),
        targets(device, kRows * 8),
        logp(device, kRows * 4),
        lse(device, kRows * 4) {
    ScopedContext scope(device);
    SHARDJIT_CU(cuMemsetD8Async(hidden.ptr(), 0x3c, hidden.bytes(), nullptr));  // bf16 0x3c3c: about 0.0115
    SHARDJIT_CU(cuMemsetD8Async(weight.ptr(), 0xbc, weight.bytes(), nullptr));  // about -0.0115
    std::vector<std::int64_t> ids(kRows);
    for (std::int64_t i = 0; i < kRows; ++i) ids[static_cast<std::size_t>(i)] = (i * 37) % kVocab;
    SHARDJIT_CU(cuMemcpyHtoDAsync(targets.ptr(), ids.data(), targets.bytes(), nullptr));
    SHARDJIT_CU(cuStreamSynchronize(nullptr));
  }
  LinearLogpInputs inputs() const {
    return {{hidden.as<void>(), DType::kBF16, kRows, kHidden, 0},
            {weight.as<void>(), DType::kBF16, kVocab, kHidden, 0},
            {},
            {targets.as<void>(), DType::kInt64, kRows}};
  }
  LinearLogpOutputs outputs() const {
    return {{logp.as<void>(), DType::kFP32, kRows}, {lse.as<void>(), DType::kFP32, kRows}, {}};
  }
  DeviceBuffer hidden, weight, targets, logp, lse;
};

// The runtime options of a bench op: a kernel cache of its own in `folder`, warnings only.
RuntimeOptions bench_runtime_options(const TempFolder& folder) {
  RuntimeOptions options;
  options.cache_dir = (folder.path() / "cache").string();
  options.log_level = "warn";
  options.jit = true;
  return options;
}

// An op of the bench's shape (its buffers sized at build for kRows, so no call grows them) on a
// runtime of its own, with a stream and the forward's buffers on its device.
struct BenchOp {
  explicit BenchOp(bool want_backward)
      : runtime(bench_runtime_options(folder)),
        op(runtime, config(want_backward)),
        device(runtime.impl().device(op.config().device)),
        stream(device),
        buffers(device) {}
  // Times `call` (one forward, or one training step) after an untimed first call, draining the
  // stream every `batch` calls, and labels the row with the shape and `what`.
  template <class Call>
  void time_calls(benchmark::State& state, std::int64_t batch, const std::string& what, Call&& call) {
    call();  // the first call is not part of the steady state
    if (op.check(stream.get()).bad_rows != 0) throw std::runtime_error("the warm-up call reported bad targets");
    std::int64_t pending = 0;
    for (auto _ : state) {
      call();
      drain_every_batch(state, pending, stream.get(), batch);
    }
    SHARDJIT_CU(cuStreamSynchronize(stream.get()));
    state.SetLabel("N " + std::to_string(kRows) + ", H " + std::to_string(kHidden) + ", V " + std::to_string(kVocab) +
                   ", bf16, " + what);
  }
  static LinearLogpConfig config(bool want_backward) {
    LinearLogpConfig c;
    c.hidden = kHidden;
    c.vocab_local = kVocab;
    c.max_rows = kRows;
    c.want_backward = want_backward;
    return c;
  }
  TempFolder folder;
  Runtime runtime;
  LinearLogp op;
  const DeviceContext& device;
  const OwnedStream stream;
  const ForwardBuffers buffers;
};

void BM_LinearLogpForwardHostTime(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  try {
    BenchOp bench(false);
    const LinearLogpInputs in = bench.buffers.inputs();
    const LinearLogpOutputs out = bench.buffers.outputs();
    bench.time_calls(state, kBatch, "2 launches per call", [&] { bench.op.forward(in, out, bench.stream.get()); });
  } catch (const std::exception& e) {
    skip_with(state, e);
  }
}
BENCHMARK(BM_LinearLogpForwardHostTime)->Unit(benchmark::kMicrosecond);

// Device buffers of a backward beside ForwardBuffers': the upstream gradient of logp (nonzero)
// and the gradients of hidden and weight.
struct BackwardBuffers {
  explicit BackwardBuffers(const DeviceContext& device)
      : grad_logp(device, kRows * 4), grad_hidden(device, kRows * kHidden * 2), grad_weight(device, kVocab * kHidden * 2) {
    ScopedContext scope(device);
    const std::vector<float> ones(kRows, 1.0f);  // a loss that sums logp
    SHARDJIT_CU(cuMemcpyHtoDAsync(grad_logp.ptr(), ones.data(), grad_logp.bytes(), nullptr));
    SHARDJIT_CU(cuStreamSynchronize(nullptr));
  }
  LinearLogpGrads grads() const {
    return {{grad_hidden.as<void>(), DType::kBF16, kRows, kHidden, 0}, {grad_weight.as<void>(), DType::kBF16, kVocab, kHidden, 0}, {}};
  }
  DeviceBuffer grad_logp, grad_hidden, grad_weight;
};

void BM_LinearLogpTrainingStepHostTime(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  try {
    BenchOp bench(true);
    const BackwardBuffers backward_buffers(bench.device);
    const LinearLogpInputs in = bench.buffers.inputs();
    const LinearLogpOutputs out = bench.buffers.outputs();
    const VectorView grad_logp{backward_buffers.grad_logp.as<void>(), DType::kFP32, kRows};
    const LinearLogpGrads grads = backward_buffers.grads();
    bench.time_calls(state, kStepBatch, "forward + backward of an op built with want_backward", [&] {
      bench.op.forward(in, out, bench.stream.get());
      bench.op.backward(in, out.lse, grad_logp, {}, grads, bench.stream.get());
    });
  } catch (const std::exception& e) {
    skip_with(state, e);
  }
}
BENCHMARK(BM_LinearLogpTrainingStepHostTime)->Unit(benchmark::kMicrosecond);

// The driver's share of the same call: two launches of an empty kernel with one argument.
void BM_BareLaunchPair(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  try {
    const DeviceContext device(0);
    const KernelSource source{"bench_noop", "shardjit_bench_noop",
                              "extern \"C\" __global__ void shardjit_bench_noop(const void* p) { (void)p; }\n"};
    const CompiledKernel compiled = NvrtcCompiler().compile(source, device.arch());
    const LoadedModule module(device, compiled.cubin);
    const CUfunction function = module.function(compiled.lowered_name);
    const OwnedStream stream(device);
    ScopedContext scope(device);
    const void* argument = nullptr;
    void* params[] = {&argument};

    std::int64_t pending = 0;
    for (auto _ : state) {
      for (int k = 0; k < 2; ++k) SHARDJIT_CU(cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream.get(), params, nullptr));
      drain_every_batch(state, pending, stream.get());
    }
    SHARDJIT_CU(cuStreamSynchronize(stream.get()));
    state.SetLabel("2 x cuLaunchKernel of an empty kernel");
  } catch (const std::exception& e) {
    skip_with(state, e);
  }
}
BENCHMARK(BM_BareLaunchPair)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardjit::bench
