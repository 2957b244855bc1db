// Cold start of a server after a prewarm: a new Runtime (an empty memory cache) building the
// LinearLogp op of a bundled model config in cache-only mode, every kernel read from a warm disk
// cache and loaded into the GPU's context. Goal: at most 20 ms beyond CUDA context creation.
//
//   context_kept:    the primary context stays alive between iterations (as in a server whose
//                    framework made it first): the time beyond context creation.
//   context_created: every iteration creates and (untimed) destroys the primary context too,
//                    like a fresh process.
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
LinearLogpConfig op_config_for(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  const nlohmann::json json = nlohmann::json::parse(in);
  LinearLogpConfig config;
  config.hidden = json.at("hidden_size").get<std::int64_t>();
  config.vocab_local = json.at("vocab_size").get<std::int64_t>();
  config.dtype = DType::kBF16;
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

void BM_ColdStart(benchmark::State& state, const char* config_file, bool keep_context) {
  if (device_count() == 0) {
    state.SkipWithError(driver_available() ? "needs a GPU: the CUDA driver reports none"
                                           : "needs a GPU: no CUDA driver on this machine");
    return;
  }
  try {
    const LinearLogpConfig config = op_config_for(model_config_path(config_file));
    const RuntimeOptions options = warm_cache_for(config);
    std::optional<DeviceContext> kept;
    if (keep_context) kept.emplace(config.device);
    for (auto _ : state) {
      std::optional<Runtime> runtime(std::in_place, options);
      std::optional<LinearLogp> op(std::in_place, *runtime, config);
      benchmark::DoNotOptimize(&*op);
      state.PauseTiming();  // teardown (and the context's destruction) is not start-up
      op.reset();
      runtime.reset();
      state.ResumeTiming();
    }
    state.SetLabel(std::string(config_file) + ", H " + std::to_string(config.hidden) + ", V " +
                   std::to_string(config.vocab_local) + ", bf16, cache-only");
  } catch (const std::exception& e) {
    static std::string message;
    message = e.what();
    state.SkipWithError(message.c_str());
  }
}

BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/context_kept, "llama3-8b.json", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, llama3_8b/context_created, "llama3-8b.json", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, qwen3_8b/context_kept, "qwen3-8b.json", true)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit::bench
