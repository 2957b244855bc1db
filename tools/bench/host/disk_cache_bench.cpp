// The disk hit: a new process (a server after a prewarm) turning a cached entry into CUBIN
// bytes: read, checksum, mark as used. Goal: at most 2 ms per kernel.
#include <benchmark/benchmark.h>

#include <random>

#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/sha256.hpp"
#include "tools/bench/host/bench_support.hpp"

namespace shardjit::bench {
namespace {

// Random bytes, as incompressible as a real CUBIN; the size is the benchmark's argument.
CacheEntry sample_entry(std::size_t cubin_bytes) {
  std::mt19937_64 random(42);
  std::string cubin(cubin_bytes, '\0');
  for (char& byte : cubin) byte = static_cast<char>(random() & 0xff);
  CacheEntry entry;
  entry.key = sha256_hex("disk cache bench " + std::to_string(cubin_bytes));
  entry.spec_text = "linear_logp_fwd<T=bf16,BiasT=none,TargetT=int64,H=4096,V_LOCAL=128256,...>";
  entry.arch = "sm_90a";
  entry.lowered_name = "_ZN8shardjit7kernels15linear_logp_fwdE";
  entry.cubin = std::move(cubin);
  return entry;
}

void BM_DiskCacheLoad(benchmark::State& state) {
  TempFolder folder;
  DiskCache cache(folder.path() / "cache", UINT64_MAX, true);
  const CacheEntry entry = sample_entry(static_cast<std::size_t>(state.range(0)));
  cache.store(entry);
  for (auto _ : state) {
    std::optional<CacheEntry> loaded = cache.load(entry.key);
    if (!loaded) state.SkipWithError("the stored entry did not load");
    benchmark::DoNotOptimize(loaded->cubin.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
// A combine kernel is ~20 KiB, a forward kernel ~300 KiB; 2 MiB leaves room for larger tiles.
BENCHMARK(BM_DiskCacheLoad)->Arg(16 << 10)->Arg(320 << 10)->Arg(2 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace shardjit::bench
