// What a training op's kernels cost on the host, without a GPU: the kernels of a fwd+bwd
// LinearLogp op (qwen2-7b's LM head: H 3584, V 152064, bf16, int64 targets; 10 kernels on
// sm_90a, 8 on sm_80) asked for at once, as the op does (KernelCache::get_all).
//
//   cold/pool:       an empty cache folder, the compile pool at one thread per hardware thread:
//                    the op's build is about its slowest kernel (more kernels than cores: more);
//                    on sm_90a every kernel is in the library's prebuilt table (a build with
//                    SHARDJIT_PREBUILT_KERNELS on), so nothing compiles there: the figure is the
//                    keys and the table's lookups, and sm_80's is the compile;
//   cold/serial:     the same with SHARDJIT_COMPILE_JOBS = 1, one kernel after another (the old
//                    build);
//   disk_warm:       a new cache (a new process's) over a folder that holds every kernel: the
//                    content keys (flattening and hashing the templates) and the entry reads,
//                    what a warm op build costs on the host before its modules are loaded;
//   disk_warm_serial: the same on one thread (SHARDJIT_COMPILE_JOBS = 1): its CPU time is the
//                    whole host cost;
//   disk_warm_keys:  the content keys alone, the part of disk_warm that is hashing templates.
//
// The cold builds report wall time and the whole process's CPU time (every pool thread): the
// CPU time is the compile work, which contention on a shared machine does not inflate.
// Module loading and CUDA context creation need a GPU: cold_start_bench.cpp times those.
#include <benchmark/benchmark.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/prewarm/plan.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

// The kernels of the training op of qwen2-7b's LM head on `arch`, in the op's order.
std::vector<KernelSpec> training_op_specs(const std::string& arch) {
  PrewarmRequest request;
  request.models = {ModelShape{"qwen2-7b", 3584, 152064, 0}};
  request.archs = {arch};
  request.backward = true;
  std::vector<KernelSpec> specs;
  for (const PrewarmItem& item : prewarm_items(request)) specs.push_back(item.spec);
  return specs;
}

void BM_OpCompileCold(benchmark::State& state, const char* arch, int jobs) {
  const std::vector<KernelSpec> specs = training_op_specs(arch);
  for (auto _ : state) {
    state.PauseTiming();
    std::optional<TempFolder> folder(std::in_place);
    RuntimeConfig config = bench_config(folder->path());
    config.compile_jobs = jobs;
    std::optional<KernelCache> cache(std::in_place, config);
    state.ResumeTiming();
    benchmark::DoNotOptimize(cache->get_all(specs, arch, "shardjit prewarm"));
    state.PauseTiming();
    cache.reset();
    folder.reset();
    state.ResumeTiming();
  }
  state.counters["kernels"] = static_cast<double>(specs.size());
  state.counters["jobs"] = static_cast<double>(jobs > 0 ? jobs : static_cast<int>(default_compile_jobs()));
}

// A folder holding every kernel of the op on `arch`, compiled once per process.
const RuntimeConfig& warm_folder(const std::string& arch) {
  static TempFolder folder;
  static const RuntimeConfig config = [&] {
    RuntimeConfig warm = bench_config(folder.path());
    KernelCache(warm).get_all(training_op_specs(arch), arch, "shardjit prewarm");
    return warm;
  }();
  return config;
}

void BM_OpBuildDiskWarm(benchmark::State& state, const char* arch, bool keys_only, int jobs = 0) {
  const std::vector<KernelSpec> specs = training_op_specs(arch);
  RuntimeConfig config = warm_folder(arch);
  config.compile_jobs = jobs;
  for (auto _ : state) {
    state.PauseTiming();
    std::optional<KernelCache> cache(std::in_place, config);  // constructing it reads the templates
    state.ResumeTiming();
    if (keys_only) {
      for (const KernelSpec& spec : specs) benchmark::DoNotOptimize(cache->key(spec, arch));
    } else {
      benchmark::DoNotOptimize(cache->get_all(specs, arch, "shardjit prewarm"));
    }
    state.PauseTiming();
    cache.reset();
    state.ResumeTiming();
  }
  state.counters["kernels"] = static_cast<double>(specs.size());
}

BENCHMARK_CAPTURE(BM_OpCompileCold, sm_90a/pool, "sm_90a", 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpCompileCold, sm_90a/serial, "sm_90a", 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpCompileCold, sm_80/pool, "sm_80", 0)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpCompileCold, sm_80/serial, "sm_80", 1)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->MeasureProcessCPUTime()
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_OpBuildDiskWarm, sm_90a/disk_warm, "sm_90a", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OpBuildDiskWarm, sm_90a/disk_warm_serial, "sm_90a", false, 1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_OpBuildDiskWarm, sm_90a/disk_warm_keys, "sm_90a", true)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shardjit::bench
