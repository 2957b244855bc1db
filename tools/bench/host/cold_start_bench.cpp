// Cold start of a server after a prewarm: a new Runtime (an empty memory cache) building the
// LinearLogp op of a bundled model config in cache-only mode, every kernel read from a warm disk
// cache and loaded into the GPU's context. Goal: at most 20 ms beyond CUDA context creation.
//
//   context_kept:    the primary context stays alive between iterations (as in a server whose
//                    framework made it first): the time beyond context creation.
//   context_created: every iteration creates and (untimed) destroys the primary context too,
//                    like a fresh process.
//   first_result:    context kept; up to the first result: the op built, one forward of one row
//                    enqueued and waited for (check()).
//   empty_cache:     as first_result, but every iteration starts from an empty cache folder
//                    with JIT on, so every kernel not in the library's prebuilt table is
//                    compiled first (on sm_90a none of a bf16 op's: the table's lookups and
//                    module loads).
//   llama3_8b_train: the training op (want_backward: forward, combine and the backward's
//                    kernels, 10 CUBINs on sm_90a), built as above; its empty_cache build is the
//                    cold fwd+bwd op build (a compile on the compile pool where the table lacks
//                    a kernel).
//
// One-time costs of a process (opening libcuda and NVRTC, the embedded templates) are paid once
// before timing starts and are not in these numbers. Needs a GPU; skips without one.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/device.hpp"
#include "shardjit/shardjit.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

// The bundled model configs (examples/configs), found from this source file.
std::filesystem::path model_config_path(const std::string& file) {
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / "examples" / "configs" / file;
}

// The op a single-GPU server builds for the model: its whole LM head, bf16 weights, int64 targets.
LinearLogpConfig op_config_for(const std::filesystem::path& path, bool backward) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const nlohmann::json json = nlohmann::json::parse(in);
  LinearLogpConfig config;
  config.hidden = json.at("hidden_size").get<std::int64_t>();
  config.vocab_local = json.at("vocab_size").get<std::int64_t>();
  config.dtype = DType::kBF16;
  config.want_backward = backward;
  return config;
}

// A cache folder holding every kernel of `config`, compiled once per process (the timed
// iterations then find them all on disk).
RuntimeOptions warm_cache_for(const LinearLogpConfig& config) {
  static TempFolder folder;
  RuntimeOptions options;
  options.cache_dir = (folder.path() / "cache").string();
  options.log_level = "warn";
  options.jit = true;
  {
    Runtime prewarm(options);
    LinearLogp op(prewarm, config);
  }
  options.jit = false;  // cache-only, as a server runs after a prewarm
  return options;
}

// Device inputs of a one-row forward of `config` (a non-zero bit pattern; target id 0), made
// once on the kept context.
struct OneRowInputs {
  explicit OneRowInputs(const LinearLogpConfig& config, const DeviceContext& device)
      : hidden(device, static_cast<std::size_t>(config.hidden) * 2),
        weight(device, static_cast<std::size_t>(config.vocab_local * config.hidden) * 2),
        targets(device, 8),
        outputs(device, 8) {
    ScopedContext scope(device);
    SHARDJIT_CU(cuMemsetD8(hidden.ptr(), 0x3c, hidden.bytes()));
    SHARDJIT_CU(cuMemsetD8(weight.ptr(), 0x3b, weight.bytes()));
    SHARDJIT_CU(cuMemsetD8(targets.ptr(), 0, targets.bytes()));
    in.hidden = {hidden.as<void>(), DType::kBF16, 1, config.hidden, 0};
    in.weight = {weight.as<void>(), DType::kBF16, config.vocab_local, config.hidden, 0};
    in.targets = {targets.as<void>(), DType::kInt64, 1};
    out.logp = {outputs.as<void>(), DType::kFP32, 1};
    out.lse = {outputs.as<char>() + 4, DType::kFP32, 1};
  }
  DeviceBuffer hidden, weight, targets, outputs;
  LinearLogpInputs in;
  LinearLogpOutputs out;
};

enum class ColdStartEnd { kOpBuilt, kFirstResult };

void BM_ColdStart(benchmark::State& state, const char* config_file, bool keep_context,
                  ColdStartEnd end = ColdStartEnd::kOpBuilt, bool empty_cache = false, bool backward = false) {
  if (device_count() == 0) {
    state.SkipWithError(driver_available() ? "needs a GPU: the CUDA driver reports none"
                                           : "needs a GPU: no CUDA driver on this machine");
    return;
  }
  try {
    const LinearLogpConfig config = op_config_for(model_config_path(config_file), backward);
    RuntimeOptions options = warm_cache_for(config);
    std::optional<DeviceContext> kept;
    if (keep_context) kept.emplace(config.device);
    std::optional<OneRowInputs> inputs;
    if (end == ColdStartEnd::kFirstResult) inputs.emplace(config, *kept);
    for (auto _ : state) {
      std::optional<TempFolder> fresh;
      if (empty_cache) {
        state.PauseTiming();
        fresh.emplace();
        options.cache_dir = (fresh->path() / "cache").string();
        options.jit = true;
        state.ResumeTiming();
      }
      std::optional<Runtime> runtime(std::in_place, options);
      std::optional<LinearLogp> op(std::in_place, *runtime, config);
      if (inputs) {
        op->forward(inputs->in, inputs->out, nullptr);
        op->check(nullptr);  // waits for the result
      }
      benchmark::DoNotOptimize(&*op);
      state.PauseTiming();  // teardown (and the context's destruction) is not start-up
      op.reset();
      runtime.reset();
      fresh.reset();
      state.ResumeTiming();
    }
    state.SetLabel(std::string(config_file) + ", H " + std::to_string(config.hidden) + ", V " +
                   std::to_string(config.vocab_local) + ", bf16" + (backward ? ", fwd+bwd" : "") +
                   (empty_cache ? ", empty cache" : ", cache-only"));
  } catch (const std::exception& e) {
    static std::string message;
    message = e.what();
    state.SkipWithError(message.c_str());
  }
}

BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/context_kept, "llama3-8b.json", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/context_created, "llama3-8b.json", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, qwen3_8b/context_kept, "qwen3-8b.json", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/first_result, "llama3-8b.json", true, ColdStartEnd::kFirstResult)
    ->Unit(benchmark::kMillisecond);
// Compiling every kernel takes seconds: a few iterations are enough.
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/empty_cache, "llama3-8b.json", true, ColdStartEnd::kFirstResult, true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b_train/context_kept, "llama3-8b.json", true, ColdStartEnd::kOpBuilt, false,
                  true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b_train/context_created, "llama3-8b.json", false, ColdStartEnd::kOpBuilt,
                  false, true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b_train/empty_cache, "llama3-8b.json", true, ColdStartEnd::kOpBuilt, true,
                  true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

}  // namespace
}  // namespace shardjit::bench
