// An op's kernels asked for at once (KernelCache::get_all): built side by side on the compile
// pool, in order, once each, with errors reaching the caller; and the count of those missing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

RuntimeConfig config_in(const testing::TempDir& dir, bool jit = true, int jobs = 0) {
  RuntimeConfig config;
  config.cache_dir = (dir.path() / "cache").string();
  config.jit = jit;
  config.cache_max_bytes = 1ull << 30;
  config.compile_jobs = jobs;
  return config;
}

// Three small kernels that differ; a repeat of the first, which must build once.
std::vector<KernelSpec> op_specs() {
  return {logp_combine_spec(DType::kInt32, false), logp_combine_spec(DType::kInt64, false),
          logp_combine_spec(DType::kInt32, true), logp_combine_spec(DType::kInt32, false)};
}

TEST(KernelCacheBatch, BuildsEveryKernelOnceAndReturnsThemInOrder) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir, true, 3));
  const std::vector<KernelSpec> specs = op_specs();
  const std::vector<CachedKernel> got = cache.get_all(specs, "sm_80", "(hint)");
  ASSERT_EQ(got.size(), specs.size());
  int compiled = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(got[i].kernel->spec_text, specs[i].canonical_text()) << i;
    EXPECT_FALSE(got[i].kernel->cubin.empty()) << i;
    compiled += got[i].origin == KernelOrigin::kCompiled;
  }
  EXPECT_EQ(compiled, 3);                          // the repeat waited for its twin's build
  EXPECT_EQ(got[3].kernel.get(), got[0].kernel.get());
  EXPECT_GE(cache.pool().started_threads(), 1u);  // the builds went through the pool
  EXPECT_LE(cache.pool().started_threads(), 3u);

  for (const CachedKernel& again : cache.get_all(specs, "sm_80", "(hint)")) {
    EXPECT_EQ(again.origin, KernelOrigin::kMemory);
  }
}

TEST(KernelCacheBatch, OneJobBuildsTheSameKernelsWithoutThePool) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir, true, 1));
  const std::vector<CachedKernel> got = cache.get_all(op_specs(), "sm_80", "");
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].origin, KernelOrigin::kCompiled);
  EXPECT_EQ(got[3].origin, KernelOrigin::kMemory);
  EXPECT_EQ(cache.pool().started_threads(), 0u);
}

TEST(KernelCacheBatch, CountsTheKernelsNeitherInMemoryNorOnDisk) {
  testing::TempDir dir;
  const std::vector<KernelSpec> specs = op_specs();
  {
    KernelCache cache(config_in(dir));
    EXPECT_EQ(cache.count_missing(specs, "sm_80"), 4u);  // the repeat is counted as asked for
    cache.get(specs[1], "sm_80", "");
    EXPECT_EQ(cache.count_missing(specs, "sm_80"), 3u);
  }
  KernelCache fresh(config_in(dir));  // a new process: kernel 1 is on disk only
  EXPECT_EQ(fresh.count_missing(specs, "sm_80"), 3u);
  fresh.get_all(specs, "sm_80", "");
  EXPECT_EQ(fresh.count_missing(specs, "sm_80"), 0u);
}

TEST(KernelCacheBatch, AFailingKernelReachesTheCallerAfterTheOthersFinish) {
  testing::TempDir dir;
  const std::vector<KernelSpec> specs = op_specs();
  KernelCache(config_in(dir)).get(specs[0], "sm_80", "");  // only kernel 0 is on disk
  KernelCache cache_only(config_in(dir, false, 4));
  try {
    cache_only.get_all(specs, "sm_80", "shardjit prewarm --hidden 64 --vocab 300 --arch sm_80");
    FAIL() << "expected a not-found error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    // The first failure in the order asked: kernel 1.
    EXPECT_NE(std::string(e.what()).find(specs[1].canonical_text()), std::string::npos) << e.what();
  }
  // Kernel 0 was found meanwhile and is served from memory now.
  EXPECT_EQ(cache_only.get(specs[0], "sm_80", "").origin, KernelOrigin::kMemory);
}

TEST(KernelCacheBatch, TheContentKeyIsTheSameComputedOnceOrAgain) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir));
  KernelCache other(config_in(dir));
  const KernelSpec spec = op_specs()[0];
  const std::string first = cache.key(spec, "sm_80");
  EXPECT_EQ(cache.key(spec, "sm_80"), first);
  EXPECT_EQ(other.key(spec, "sm_80"), first);
  EXPECT_NE(cache.key(spec, "sm_90a"), first);
}

}  // namespace
}  // namespace shardjit
