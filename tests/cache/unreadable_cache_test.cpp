// A cache folder that the current user can reach but not read (root's, mode 0700, as in an image
// run by another user): its entries are missing to that user, never an error, and with JIT on
// kernels are compiled into memory, as the warning says.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/kernel_cache.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"
#include "tests/cache/other_user.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;

class UnreadableCache : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = test::other_user_unavailable();
    if (!why.empty()) GTEST_SKIP() << why;
    // The other user must reach the cache folder (not read it): the test's folder is opened up.
    ASSERT_EQ(::chmod(temp_.path().c_str(), 0755), 0);
    DiskCache(cache_, UINT64_MAX, true).store(test::test_entry("a"));
    ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  }
  testing::TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
};

TEST_F(UnreadableCache, AnEntryThatCannotBeReadIsMissingNotAnError) {
  const fs::path cache = cache_;
  const int status = test::run_as_other_user([cache] {
    DiskCache disk(cache, UINT64_MAX, false);
    return disk.load(test::test_key("a")) ? 2 : 0;
  });
  EXPECT_EQ(status, 0) << "2: a hit no one can read; 126: load threw";
}

TEST_F(UnreadableCache, JitCompilesIntoMemory) {
  const fs::path cache = cache_;
  const int status = test::run_as_other_user([cache] {
    RuntimeConfig config;
    config.cache_dir = cache.string();
    config.jit = true;
    config.cache_max_bytes = UINT64_MAX;
    KernelCache kernels(config);
    if (kernels.disk().writable()) return 2;
    const CachedKernel got = kernels.get(logp_combine_spec(DType::kInt32, false), "sm_80", "(hint)");
    return got.origin == KernelOrigin::kCompiled && !got.kernel->cubin.empty() ? 0 : 3;
  });
  EXPECT_EQ(status, 0) << "2: the folder looked writable; 3: not compiled; 126: get threw";
}

}  // namespace
}  // namespace shardjit
