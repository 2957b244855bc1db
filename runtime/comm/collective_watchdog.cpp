#include "runtime/comm/collective_watchdog.hpp"

#include <algorithm>
#include <utility>

namespace shardjit {

CollectiveWatchdog::CollectiveWatchdog(Expire on_expire) : on_expire_(std::move(on_expire)) {}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::chrono::milliseconds CollectiveWatchdog::poll_interval(std::chrono::milliseconds timeout) {
  return std::clamp(timeout / 50, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
}

void CollectiveWatchdog::watch(Probe probe, std::string what, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (expired_ || stopping_) return;  // the communicator is gone already; nothing left to abort
    items_.push_back(Item{std::move(probe), std::move(what), timeout});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

std::size_t CollectiveWatchdog::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return items_.size();
}

bool CollectiveWatchdog::expired() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return expired_;
}

void CollectiveWatchdog::run() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    while (!stopping_ && poll_oldest(lock)) {
    }
  } catch (...) {
    // Out of memory for a message: stop watching rather than end the process. The callers'
    // own bounded waits (check(), strict mode) still hold.
  }
}

bool CollectiveWatchdog::poll_oldest(std::unique_lock<std::mutex>& lock) {
  if (items_.empty()) {
    wake_.wait(lock, [&] { return stopping_ || !items_.empty(); });
    return true;
  }
  // Polled without the lock, so that watch() never waits on a probe. Only this thread removes
  // items, and a deque's push_back keeps references to its elements, so `oldest` stays valid.
  Item& oldest = items_.front();
  lock.unlock();
  const Progress progress = oldest.probe();
  lock.lock();
  if (progress == Progress::kFinished) {
    items_.pop_front();
    return true;
  }
  if (progress == Progress::kFailed) return expire(lock, /*failed=*/true);
  const Clock::time_point now = Clock::now();
  if (progress == Progress::kQueued) {
    wake_.wait_for(lock, poll_interval(oldest.timeout), [&] { return stopping_; });
    return true;
  }
  if (!oldest.running) {
    oldest.running = true;
    oldest.running_since = now;
  }
  const Clock::time_point deadline = oldest.running_since + oldest.timeout;
  if (now < deadline) {
    const auto pause = std::min<Clock::duration>(poll_interval(oldest.timeout), deadline - now);
    wake_.wait_for(lock, pause, [&] { return stopping_; });
    return true;
  }
  return expire(lock, /*failed=*/false);
}

bool CollectiveWatchdog::expire(std::unique_lock<std::mutex>& lock, bool failed) {
  expired_ = true;
  const Expiry expiry{items_.front().what, items_.front().timeout, failed};
  items_.clear();
  // The abort may take a while (it tears down NCCL's connections); watch() must not wait on it.
  lock.unlock();
  on_expire_(expiry);
  lock.lock();
  return false;
}

}  // namespace shardjit
