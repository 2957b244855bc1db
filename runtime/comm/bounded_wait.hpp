// Bounded host-side waiting: every wait of shardjit on a peer (joining a communicator, an
// exchange at op build, a stream that waits for a collective) ends, either done or timed out, so
// that a dead or missing peer becomes an error instead of a hang.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace shardjit {

// Calls `done()` until it returns true (then returns true) or `timeout` has passed (then returns
// false; `done` was called at least once). Between calls it yields, then sleeps with a backoff
// from 2 microseconds up to a millisecond, so short waits stay short and long ones cost no CPU.
// Exceptions of `done` propagate.
template <class Done>
bool wait_until(Done&& done, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::chrono::microseconds pause{0};
  constexpr std::chrono::microseconds kLongestPause{1000};
  while (true) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = std::chrono::microseconds{2};
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestPause);
    }
  }
}

}  // namespace shardjit
