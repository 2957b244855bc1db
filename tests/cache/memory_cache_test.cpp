#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "runtime/cache/memory_cache.hpp"

namespace shardjit {
namespace {

MemoryCache::Value kernel_named(const std::string& name) {
  auto kernel = std::make_shared<CompiledKernel>();
  kernel->spec_text = name;
  return kernel;
}

TEST(MemoryCache, ConcurrentCallersOfOneKeyComputeItOnce) {
  MemoryCache cache(16);
  std::atomic<int> computations{0};
  std::vector<std::thread> threads;
  std::vector<MemoryCache::Value> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<std::size_t>(i)] = cache.get_or_compute("k", [&] {
        ++computations;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return kernel_named("k");
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(computations.load(), 1);
  for (const auto& r : results) EXPECT_EQ(r.get(), results[0].get());
}

TEST(MemoryCache, DifferentKeysComputeInParallel) {
  MemoryCache cache(16);
  std::atomic<int> running{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      cache.get_or_compute("k" + std::to_string(i), [&] {
        int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {}
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        --running;
        return kernel_named("x");
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(most.load(), 1) << "compiles of different keys must not be serialized";
}

TEST(MemoryCache, FailuresAreNotCachedAndReachTheCaller) {
  MemoryCache cache(16);
  EXPECT_THROW(cache.get_or_compute("k", []() -> MemoryCache::Value { throw std::runtime_error("boom"); }),
               std::runtime_error);
  bool computed = false;
  auto value = cache.get_or_compute("k", [] { return kernel_named("ok"); }, &computed);
  EXPECT_TRUE(computed);
  EXPECT_EQ(value->spec_text, "ok");
}

TEST(MemoryCache, EvictsTheLeastRecentlyUsedPastItsBound) {
  MemoryCache cache(2);
  cache.get_or_compute("a", [] { return kernel_named("a"); });
  cache.get_or_compute("b", [] { return kernel_named("b"); });
  cache.get_or_compute("a", [] { return kernel_named("a2"); });  // touch a
  cache.get_or_compute("c", [] { return kernel_named("c"); });   // evicts b
  EXPECT_EQ(cache.size(), 2u);
  bool computed = false;
  cache.get_or_compute("a", [] { return kernel_named("a3"); }, &computed);
  EXPECT_FALSE(computed);
  cache.get_or_compute("b", [] { return kernel_named("b2"); }, &computed);
  EXPECT_TRUE(computed);
}

TEST(MemoryCache, ContainsWhatIsHeldOrInFlightButNotAFailure) {
  MemoryCache cache(16);
  EXPECT_FALSE(cache.contains("k"));
  std::atomic<bool> release{false};
  std::thread computing([&] {
    cache.get_or_compute("k", [&] {
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return kernel_named("k");
    });
  });
  while (cache.size() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(cache.contains("k"));  // in flight: a get_or_compute would wait, not compute
  release = true;
  computing.join();
  EXPECT_TRUE(cache.contains("k"));
  EXPECT_THROW(cache.get_or_compute("bad", []() -> MemoryCache::Value { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_FALSE(cache.contains("bad"));
}

}  // namespace
}  // namespace shardjit
