// runtime/tooling.hpp hands the tools the Runtime's own parts: the settings it resolved from its
// options, and the kernel cache its ops load through (its folder and its cache-only mode).
#include <gtest/gtest.h>

#include <string>

#include "runtime/ops/collective/kernels.hpp"
#include "runtime/tooling.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

TEST(Tooling, RuntimeConfigIsWhatTheOptionsResolvedTo) {
  testing::TempDir dir;
  RuntimeOptions options;
  options.cache_dir = dir.path().string();
  options.peer_blocks = 7;
  options.hopper_path = false;
  Runtime runtime(options);
  const RuntimeConfig& config = tooling::runtime_config(runtime);
  EXPECT_EQ(config.cache_dir, runtime.cache_dir());
  EXPECT_EQ(config.peer_blocks, 7);
  EXPECT_FALSE(config.hopper_path);
}

TEST(Tooling, KernelCacheIsTheRuntimesOwn) {
  testing::TempDir dir;
  RuntimeOptions options;
  options.cache_dir = dir.path().string();
  options.jit = false;
  Runtime cache_only(options);
  KernelCache& cache = tooling::kernel_cache(cache_only);
  EXPECT_EQ(&cache, &tooling::kernel_cache(cache_only));
  EXPECT_FALSE(cache.jit_enabled());
  // An empty folder in cache-only mode: the kernel is not found, and the message says how to build it.
  try {
    cache.get(reduce_scatter_spec(DType::kBF16, 2, 16), "sm_90", "shardjit prewarm --collectives");
    FAIL() << "a cache-only runtime with an empty folder returned a kernel";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound) << e.what();
    EXPECT_NE(std::string(e.what()).find("shardjit prewarm"), std::string::npos) << e.what();
  }

  options.jit = true;
  Runtime compiling(options);
  EXPECT_TRUE(tooling::kernel_cache(compiling).jit_enabled());
  EXPECT_NE(&tooling::kernel_cache(compiling), &cache);
}

}  // namespace
}  // namespace shardjit
