// Bounded host-side waiting: every wait of shardjit on a peer (joining a communicator, an
// exchange at op build, a stream that waits for a collective) ends, either done or timed out, so
// that a dead or missing peer becomes an error instead of a hang.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace shardjit {

// How long wait_until polls without sleeping. Most waits are short: a non-blocking NCCL
// communicator returns ncclInProgress from every collective while its own thread launches the
// kernels (tens of microseconds), and the op cannot record its events before that. Any sleep
// costs at least the kernel's timer slack (~50 us), more than such a wait itself.
inline constexpr std::chrono::microseconds kSpinBeforeSleep{500};

// Calls `done()` until it returns true (then returns true) or `timeout` has passed (then returns
// false; `done` was called at least once). For the first kSpinBeforeSleep it only yields
// between calls; then it sleeps with a backoff from 50 microseconds up to a millisecond, so that
// long waits cost no CPU. Exceptions of `done` propagate.
template <class Done>
bool wait_until(Done&& done, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + timeout;
  std::chrono::microseconds pause{50};
  constexpr std::chrono::microseconds kLongestPause{1000};
  while (true) {
    if (done()) return true;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return false;
    if (now - start < kSpinBeforeSleep) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestPause);
    }
  }
}

}  // namespace shardjit
