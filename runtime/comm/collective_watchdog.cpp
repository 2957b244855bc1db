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

void CollectiveWatchdog::watch(Probe done, std::string what, std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (expired_ || stopping_) return;  // the communicator is gone already; nothing left to abort
    items_.push_back(Item{std::move(done), std::move(what), timeout, Clock::now()});
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

void CollectiveWatchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  // When the last item seen finished: the oldest item's clock starts no earlier.
  Clock::time_point progress = Clock::time_point::min();
  while (!stopping_) {
    if (items_.empty()) {
      wake_.wait(lock, [&] { return stopping_ || !items_.empty(); });
      continue;
    }
    // Polled without the lock, so that watch() never waits on a probe; only this thread removes
    // items, so the oldest is still the oldest afterwards.
    const Probe probe = items_.front().done;
    lock.unlock();
    const bool done = probe();
    lock.lock();
    if (done) {
      items_.pop_front();
      progress = Clock::now();
      continue;
    }
    const Item& oldest = items_.front();
    const Clock::time_point deadline = std::max(oldest.enqueued, progress) + oldest.timeout;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      expired_ = true;
      const std::string what = oldest.what;
      const std::chrono::milliseconds timeout = oldest.timeout;
      items_.clear();
      // The abort may take a while (it tears down NCCL's connections); watch() must not wait on it.
      lock.unlock();
      on_expire_(what, timeout);
      return;
    }
    const auto pause = std::min<Clock::duration>(poll_interval(oldest.timeout), deadline - now);
    wake_.wait_for(lock, pause, [&] { return stopping_; });
  }
}

}  // namespace shardjit
