// The memory-cache hit: what every op build pays per kernel once the kernel is loaded in the
// process. Goal: at most 1 microsecond.
#include <benchmark/benchmark.h>

#include "runtime/cache/kernel_cache.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

constexpr const char* kArch = "sm_90a";

void BM_KernelCacheMemoryHit(benchmark::State& state) {
  TempFolder folder;
  KernelCache cache(bench_config(folder.path()));
  const KernelSpec spec = tiny_spec("logp_combine", kArch);
  cache.get(spec, kArch, "");  // compiled once here, so that every timed call is a memory hit
  for (auto _ : state) {
    CachedKernel hit = cache.get(spec, kArch, "");
    benchmark::DoNotOptimize(hit.kernel.get());
    if (hit.origin != KernelOrigin::kMemory) state.SkipWithError("expected a memory hit");
  }
}
BENCHMARK(BM_KernelCacheMemoryHit)->Unit(benchmark::kNanosecond);

}  // namespace
}  // namespace shardjit::bench
