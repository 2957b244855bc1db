// The kernel cache as the ops see it: memory -> disk -> NVRTC, content keys, cache-only mode.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "shardjit/error.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

RuntimeConfig config_in(const testing::TempDir& dir, bool jit = true) {
  RuntimeConfig config;
  config.cache_dir = (dir.path() / "cache").string();
  config.jit = jit;
  config.cache_max_bytes = 1ull << 30;
  return config;
}

KernelSpec small_spec() { return logp_combine_spec(DType::kInt32, false); }

TEST(KernelCache, CompilesOnceThenServesFromMemoryThenFromDisk) {
  testing::TempDir dir;
  {
    KernelCache cache(config_in(dir));
    CachedKernel first = cache.get(small_spec(), "sm_80", "(hint)");
    EXPECT_EQ(first.origin, KernelOrigin::kCompiled);
    EXPECT_FALSE(first.kernel->cubin.empty());
    CachedKernel again = cache.get(small_spec(), "sm_80", "(hint)");
    EXPECT_EQ(again.origin, KernelOrigin::kMemory);
    EXPECT_EQ(again.kernel.get(), first.kernel.get());
  }
  KernelCache fresh(config_in(dir));  // another process would see the same
  CachedKernel from_disk = fresh.get(small_spec(), "sm_80", "(hint)");
  EXPECT_EQ(from_disk.origin, KernelOrigin::kDisk);
}

TEST(KernelCache, ConcurrentFirstUseOfOneSpecCompilesItOnce) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir));
  std::atomic<int> compiled{0};
  std::vector<std::thread> threads;
  std::vector<const CompiledKernel*> seen(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      CachedKernel got = cache.get(small_spec(), "sm_80", "");
      if (got.origin == KernelOrigin::kCompiled) ++compiled;
      seen[static_cast<std::size_t>(i)] = got.kernel.get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(compiled.load(), 1);
  for (const CompiledKernel* kernel : seen) EXPECT_EQ(kernel, seen[0]);
}

TEST(KernelCache, CacheOnlyModeNamesThePrewarmCommand) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir, false));
  try {
    cache.get(small_spec(), "sm_80", "shardjit prewarm --hidden 64 --vocab 300 --arch sm_80");
    FAIL() << "expected a not-found error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    const std::string message = e.what();
    EXPECT_NE(message.find("SHARDJIT_JIT=0"), std::string::npos) << message;
    const std::string command = "build it with: shardjit prewarm --hidden 64 --vocab 300 --arch sm_80 --cache-dir " +
                                config_in(dir).cache_dir;
    EXPECT_EQ(message.substr(message.size() - std::min(message.size(), command.size())), command) << message;
  }
}

// The command names the runtime's own folder, quoted for the shell where it needs to be: a
// server's cache set in code is not the one a bare `shardjit prewarm` fills.
TEST(KernelCache, CacheOnlyModeCommandQuotesTheCacheFolder) {
  testing::TempDir dir;
  RuntimeConfig config = config_in(dir, false);
  config.cache_dir = (dir.path() / "it's a cache").string();
  KernelCache cache(config);
  try {
    cache.get(small_spec(), "sm_80", "shardjit prewarm --hidden 64");
    FAIL() << "expected a not-found error";
  } catch (const Error& e) {
    const std::string message = e.what();
    const std::string quoted = "'" + (dir.path() / "it'\\''s a cache").string() + "'";
    EXPECT_NE(message.find("shardjit prewarm --hidden 64 --cache-dir " + quoted), std::string::npos) << message;
  }
}

// A prewarmed folder this user cannot write (an image's root-owned cache) serves its kernels
// with JIT on too, and what it lacks is compiled into memory, not refused.
TEST(KernelCache, AFolderItCannotWriteIsReadAndMissesCompileIntoMemory) {
  if (::geteuid() == 0) GTEST_SKIP() << "root may write any folder";
  testing::TempDir dir;
  const RuntimeConfig config = config_in(dir);
  KernelCache(config).get(small_spec(), "sm_80", "");
  std::filesystem::permissions(config.cache_dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  {
    KernelCache cache(config);
    EXPECT_FALSE(cache.disk().writable());
    EXPECT_EQ(cache.get(small_spec(), "sm_80", "").origin, KernelOrigin::kDisk);
    EXPECT_EQ(cache.get(logp_combine_spec(DType::kInt64, false), "sm_80", "").origin, KernelOrigin::kCompiled);
  }
  KernelCache again(config);
  EXPECT_EQ(again.get(logp_combine_spec(DType::kInt64, false), "sm_80", "").origin, KernelOrigin::kCompiled);
  std::filesystem::permissions(config.cache_dir, std::filesystem::perms::owner_all);
}

TEST(KernelCache, CacheOnlyModeLoadsWhatWasPrewarmed) {
  testing::TempDir dir;
  KernelCache(config_in(dir)).get(small_spec(), "sm_80", "");
  KernelCache cache_only(config_in(dir, false));
  EXPECT_EQ(cache_only.get(small_spec(), "sm_80", "").origin, KernelOrigin::kDisk);
}

TEST(KernelCache, KeyDependsOnSpecArchAndTemplateText) {
  testing::TempDir dir;
  KernelCache cache(config_in(dir));
  const std::string key = cache.key(small_spec(), "sm_80");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, cache.key(small_spec(), "sm_80"));
  EXPECT_NE(key, cache.key(small_spec(), "sm_90a"));
  EXPECT_NE(key, cache.key(logp_combine_spec(DType::kInt32, true), "sm_80"));

  // The same templates from a folder give the same key (content, not paths, is hashed) ...
  testing::TempDir templates;
  std::filesystem::copy(std::filesystem::path(SHARDJIT_SOURCE_DIR) / "templates", templates.path(),
                        std::filesystem::copy_options::recursive);
  RuntimeConfig from_folder = config_in(dir);
  from_folder.template_dir = templates.path().string();
  EXPECT_EQ(KernelCache(from_folder).key(small_spec(), "sm_80"), key);

  // ... and a change in an included file changes it.
  std::ofstream(templates.path() / "linear_logp/partials.cuh", std::ios::app) << "\n// changed\n";
  EXPECT_NE(KernelCache(from_folder).key(small_spec(), "sm_80"), key);
}

}  // namespace
}  // namespace shardjit
