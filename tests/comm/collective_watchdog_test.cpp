// The collective watchdog on its own, with probes the test controls: work that finishes is
// dropped, work that runs for its timeout without finishing expires once, work that fails
// expires at once, and time spent queued behind other work does not count.
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
  std::vector<bool> failed;
  Clock::time_point when{};

  CollectiveWatchdog::Expire callback() {
    return [this](const CollectiveWatchdog::Expiry& expiry) {
      std::lock_guard<std::mutex> lock(mutex);
      names.push_back(expiry.what);
      timeouts.push_back(expiry.timeout);
      failed.push_back(expiry.failed);
      when = Clock::now();
    };
  }
  std::size_t count() {
    std::lock_guard<std::mutex> lock(mutex);
    return names.size();
  }
};

// A probe whose answer the test sets: queued, running (the default) or finished.
struct Stage {
  using Progress = CollectiveWatchdog::Progress;
  std::shared_ptr<std::atomic<Progress>> now = std::make_shared<std::atomic<Progress>>(Progress::kRunning);
  CollectiveWatchdog::Probe probe() const {
    return [p = now] { return p->load(); };
  }
  void set(Progress progress) const { now->store(progress); }
  void finish() const { set(Progress::kFinished); }
};

TEST(CollectiveWatchdog, FinishedWorkIsDroppedWithoutExpiring) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  std::vector<Stage> flags(3);
  for (std::size_t i = 0; i < flags.size(); ++i) {
    watchdog.watch(flags[i].probe(), "collective " + std::to_string(i), milliseconds(60000));
  }
  EXPECT_EQ(watchdog.pending(), 3u);
  for (const Stage& f : flags) f.finish();
  EXPECT_TRUE(wait_until([&] { return watchdog.pending() == 0; }, milliseconds(10000)));
  EXPECT_FALSE(watchdog.expired());
  EXPECT_EQ(expiries.count(), 0u);
}

TEST(CollectiveWatchdog, RunningWorkThatDoesNotFinishExpiresOnceAfterItsTimeout) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  const Clock::time_point start = Clock::now();
  const Stage stuck;
  watchdog.watch(stuck.probe(), "ncclAllGather (rank 0 of 2)", milliseconds(100));
  watchdog.watch(Stage().probe(), "ncclAllReduce (rank 0 of 2)", milliseconds(100));
  ASSERT_TRUE(wait_until([&] { return expiries.count() > 0; }, milliseconds(20000))) << "never expired";
  EXPECT_TRUE(watchdog.expired());
  EXPECT_GE(expiries.when - start, milliseconds(100)) << "expired before its timeout";
  {
    std::lock_guard<std::mutex> lock(expiries.mutex);
    ASSERT_EQ(expiries.names.size(), 1u);
    EXPECT_EQ(expiries.names[0], "ncclAllGather (rank 0 of 2)");  // the oldest one
    EXPECT_EQ(expiries.timeouts[0], milliseconds(100));
    EXPECT_FALSE(expiries.failed[0]);
  }
  // Nothing is watched after an expiry: the communicator is gone.
  EXPECT_EQ(watchdog.pending(), 0u);
  watchdog.watch(Stage().probe(), "later", milliseconds(10));
  EXPECT_EQ(watchdog.pending(), 0u);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(expiries.count(), 1u);
}

// A collective whose communicator reported an error expires without waiting out its timeout,
// whether it was running or still queued, and says that it failed.
TEST(CollectiveWatchdog, FailedWorkExpiresAtOnce) {
  for (const auto before : {CollectiveWatchdog::Progress::kRunning, CollectiveWatchdog::Progress::kQueued}) {
    Expiries expiries;
    CollectiveWatchdog watchdog(expiries.callback());
    const Stage failing;
    failing.set(before);
    watchdog.watch(failing.probe(), "ncclAllReduce (rank 1 of 2)", std::chrono::hours(1));
    watchdog.watch(Stage().probe(), "ncclAllGather (rank 1 of 2)", std::chrono::hours(1));
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_EQ(expiries.count(), 0u) << "expired before it failed";
    const Clock::time_point failed_at = Clock::now();
    failing.set(CollectiveWatchdog::Progress::kFailed);
    ASSERT_TRUE(wait_until([&] { return expiries.count() > 0; }, milliseconds(20000))) << "never expired";
    // Polled every 100 ms at most with a timeout this long: well within 10 s of the failure.
    EXPECT_LT(expiries.when - failed_at, milliseconds(10000));
    EXPECT_TRUE(watchdog.expired());
    EXPECT_EQ(watchdog.pending(), 0u);
    std::lock_guard<std::mutex> lock(expiries.mutex);
    ASSERT_EQ(expiries.names.size(), 1u);
    EXPECT_EQ(expiries.names[0], "ncclAllReduce (rank 1 of 2)");
    EXPECT_TRUE(expiries.failed[0]);
    EXPECT_EQ(expiries.timeouts[0], std::chrono::hours(1));
  }
}

// A collective queued behind 1.5 s of other work, with a timeout of 1 s, runs for 50 ms once
// its turn comes: its clock starts when it starts running, so it does not expire.
TEST(CollectiveWatchdog, TimeSpentQueuedDoesNotCount) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  const Stage first;
  const Stage second;
  second.set(CollectiveWatchdog::Progress::kQueued);
  watchdog.watch(first.probe(), "first", milliseconds(60000));
  watchdog.watch(second.probe(), "second", milliseconds(1000));
  std::this_thread::sleep_for(milliseconds(1500));
  first.finish();
  second.set(CollectiveWatchdog::Progress::kRunning);
  ASSERT_TRUE(wait_until([&] { return watchdog.pending() == 1; }, milliseconds(10000)));
  std::this_thread::sleep_for(milliseconds(50));
  second.finish();
  EXPECT_TRUE(wait_until([&] { return watchdog.pending() == 0; }, milliseconds(10000)));
  EXPECT_EQ(expiries.count(), 0u) << "the second item expired although it had just started running";
}

// An item that stays queued is never timed: only running work is.
TEST(CollectiveWatchdog, WorkThatStaysQueuedNeverExpires) {
  Expiries expiries;
  CollectiveWatchdog watchdog(expiries.callback());
  const Stage queued;
  queued.set(CollectiveWatchdog::Progress::kQueued);
  watchdog.watch(queued.probe(), "queued", milliseconds(50));
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(expiries.count(), 0u);
  queued.set(CollectiveWatchdog::Progress::kRunning);
  EXPECT_TRUE(wait_until([&] { return expiries.count() == 1; }, milliseconds(20000)));
}

TEST(CollectiveWatchdog, DestroyingItWithWorkPendingNeitherWaitsNorExpires) {
  Expiries expiries;
  const Clock::time_point start = Clock::now();
  {
    CollectiveWatchdog watchdog(expiries.callback());
    watchdog.watch(Stage().probe(), "stuck", std::chrono::hours(1));
  }
  EXPECT_LT(Clock::now() - start, milliseconds(10000));
  EXPECT_EQ(expiries.count(), 0u);
}

}  // namespace
}  // namespace shardjit
