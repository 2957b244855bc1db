// The collective watchdog on its own, with probes the test controls: work that finishes is
// dropped, work that makes no progress for its timeout expires once, and a deep queue of work
// that finishes in turn is progress, not a timeout.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/bounded_wait.hpp"
#include "runtime/comm/collective_watchdog.hpp"

namespace shardjit {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// What the watchdog reported, with the time it did.
struct Expiries {
  std::mutex mutex;
  std::vector<std::string> names;
  std::vector<milliseconds> timeouts;
  Clock::time_point when{};

  CollectiveWatchdog::Expire callback() {
    return [this](const std::string& what, milliseconds timeout) {
      std::lock_guard<std::mutex> lock(mutex);
      names.push_back(what);
      timeouts.push_back(timeout);
      when = Clock::now();
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return names.size();
  }
};

// A probe that reports done once the test sets its flag.
struct Flag {
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
  CollectiveWatchdog::Probe probe() const {
    return [d = done] { return d->load(); };
  }
  void set() const { done->store(true); }
};

TEST(CollectiveWatchdog, FinishedWorkIsDroppedWithoutExpiring) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  std::vector<Flag> flags(3);
  for (std::size_t i = 0; i < flags.size(); ++i) {
    watchdog.watch(flags[i].probe(), "collective " + std::to_string(i), milliseconds(60000));
  }
  EXPECT_EQ(watchdog.pending(), 3u);
  for (const Flag& f : flags) f.set();
  EXPECT_TRUE(wait_until([&] { return watchdog.pending() == 0; }, milliseconds(10000)));
  EXPECT_FALSE(watchdog.expired());
  EXPECT_EQ(expiries.count(), 0u);
}

TEST(CollectiveWatchdog, WorkWithoutProgressExpiresOnceAfterItsTimeout) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  const Clock::time_point start = Clock::now();
  const Flag stuck;
  watchdog.watch(stuck.probe(), "ncclAllGather (rank 0 of 2)", milliseconds(100));
  watchdog.watch(Flag().probe(), "ncclAllReduce (rank 0 of 2)", milliseconds(100));
  ASSERT_TRUE(wait_until([&] { return expiries.count() > 0; }, milliseconds(20000))) << "never expired";
  EXPECT_TRUE(watchdog.expired());
  EXPECT_GE(expiries.when - start, milliseconds(100)) << "expired before its timeout";
  {
    std::lock_guard<std::mutex> lock(expiries.mutex);
    ASSERT_EQ(expiries.names.size(), 1u);
    EXPECT_EQ(expiries.names[0], "ncclAllGather (rank 0 of 2)");  // the oldest one
    EXPECT_EQ(expiries.timeouts[0], milliseconds(100));
  }
  // Nothing is watched after an expiry: the communicator is gone.
  EXPECT_EQ(watchdog.pending(), 0u);
  watchdog.watch(Flag().probe(), "later", milliseconds(10));
  EXPECT_EQ(watchdog.pending(), 0u);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(expiries.count(), 1u);
}

// Two items enqueued together: the second's own timeout (1 s) is shorter than the first's run
// (1.5 s), but its clock starts when the first finishes, so it does not expire.
TEST(CollectiveWatchdog, TheClockOfQueuedWorkStartsWhenTheWorkBeforeItFinishes) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  const Flag first;
  const Flag second;
  watchdog.watch(first.probe(), "first", milliseconds(60000));
  watchdog.watch(second.probe(), "second", milliseconds(1000));
  std::this_thread::sleep_for(milliseconds(1500));
  first.set();
  ASSERT_TRUE(wait_until([&] { return watchdog.pending() == 1; }, milliseconds(10000)));
  std::this_thread::sleep_for(milliseconds(50));
  second.set();
  EXPECT_TRUE(wait_until([&] { return watchdog.pending() == 0; }, milliseconds(10000)));
  EXPECT_EQ(expiries.count(), 0u) << "the second item expired although the first had just finished";
}

TEST(CollectiveWatchdog, DestroyingItWithWorkPendingNeitherWaitsNorExpires) {
  Expiries expiries;
  const Clock::time_point start = Clock::now();
  {
    CollectiveWatchdog watchdog(expiries.callback());
    watchdog.watch(Flag().probe(), "stuck", std::chrono::hours(1));
  }
  EXPECT_LT(Clock::now() - start, milliseconds(10000));
  EXPECT_EQ(expiries.count(), 0u);
}

}  // namespace
}  // namespace shardjit
