#include "tools/cli/prewarm_runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "shardjit/error.hpp"

namespace shardjit::cli {
namespace {

enum class Outcome { kCompiled, kCached, kFailed };

struct Shared {
  Shared(KernelCache& c, const std::vector<PrewarmItem>& i, Progress& p) : cache(c), items(i), progress(p) {}
  KernelCache& cache;
  const std::vector<PrewarmItem>& items;
  Progress& progress;
  std::atomic<std::size_t> next{0};
  std::mutex mutex;  // guards summary
  PrewarmSummary summary;
};

std::string describe(const PrewarmItem& item) { return item.spec.canonical_text() + " " + item.arch; }

// Builds one item; never throws, so that one bad kernel cannot take the pool down.
Outcome build(Shared& shared, const PrewarmItem& item, std::string* error) {
  try {
    // JIT is on during a prewarm, so the cache-only hint is never shown.
    CachedKernel kernel = shared.cache.get(item.spec, item.arch, "shardjit prewarm");
    return kernel.origin == KernelOrigin::kCompiled ? Outcome::kCompiled : Outcome::kCached;
  } catch (const std::exception& caught) {
    *error = caught.what();
  } catch (...) {
    *error = "unexpected error of an unknown type";
  }
  return Outcome::kFailed;
}

void record(Shared& shared, const PrewarmItem& item, Outcome outcome, std::string error) {
  static constexpr const char* kVerbs[] = {"compiled", "cached", "failed"};
  {
    std::lock_guard<std::mutex> lock(shared.mutex);
    if (outcome == Outcome::kCompiled) ++shared.summary.compiled;
    if (outcome == Outcome::kCached) ++shared.summary.cached;
    if (outcome == Outcome::kFailed) shared.summary.failures.push_back({describe(item), item.origin, std::move(error)});
  }
  shared.progress.finished(kVerbs[static_cast<int>(outcome)], describe(item));
}

void worker(Shared& shared) {
  for (;;) {
    const std::size_t index = shared.next.fetch_add(1);
    if (index >= shared.items.size()) return;
    std::string error;
    Outcome outcome = build(shared, shared.items[index], &error);
    record(shared, shared.items[index], outcome, std::move(error));
  }
}

}  // namespace

PrewarmSummary run_prewarm(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs,
                           Progress& progress) {
  const auto start = std::chrono::steady_clock::now();
  Shared shared{cache, items, progress};
  shared.summary.total = items.size();
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), items.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 0; i < threads; ++i) {
    try {
      pool.emplace_back(worker, std::ref(shared));
    } catch (const std::system_error&) {
      // Out of threads: the workers already started still take every item.
      if (pool.empty()) throw;
      break;
    }
  }
  for (std::thread& thread : pool) thread.join();
  progress.close();
  std::sort(shared.summary.failures.begin(), shared.summary.failures.end(),
            [](const PrewarmFailure& a, const PrewarmFailure& b) { return a.kernel < b.kernel; });
  shared.summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::move(shared.summary);
}

}  // namespace shardjit::cli
