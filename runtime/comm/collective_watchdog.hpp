// CollectiveWatchdog: a thread that watches the NCCL collectives a communicator has enqueued and
// aborts the communicator when one has run for its timeout without finishing, or at once when
// one can no longer finish (NCCL reported an error on its communicator).
//
// Why: every host-side wait of shardjit on a peer is bounded, but a caller may wait on its own
// (cudaStreamSynchronize, a framework's event), and an NCCL kernel waiting for a dead peer
// spins forever. Aborting the communicator (ncclCommAbort) ends that kernel, so such a wait
// returns; the op's next call or check() then raises Error(kCommError) naming the collective.
//
// A watched item is a probe, polled from the watchdog's thread, that says whether the collective
// is still queued behind earlier work, running, finished, or failed. Its clock starts when it is
// first seen running, so neither a deep queue of calls nor long GPU work ahead of the collective
// counts against it. Items finish in the order they were enqueued (one stream), so only the
// oldest is polled. The timeout is the communicator's at the time of the enqueue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace shardjit {

class CollectiveWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // kFailed: the collective cannot finish any more (its communicator reported an error while it
  // was queued or running), so waiting out its timeout would only delay the abort.
  enum class Progress { kQueued, kRunning, kFinished, kFailed };
  // Where the watched collective is. Called from the watchdog's thread; it must not throw (an
  // error that says nothing about the collective counts as kFinished: it is no longer watched).
  using Probe = std::function<Progress()>;
  // What ended the watch: the item's name, the time it was given, and whether its probe said
  // kFailed (false: it ran for its whole timeout without finishing).
  struct Expiry {
    std::string what;
    std::chrono::milliseconds timeout;
    bool failed;
  };
  // Called once, from the watchdog's thread, for the item that expired; the watchdog stops
  // watching after it.
  using Expire = std::function<void(const Expiry& expiry)>;

  explicit CollectiveWatchdog(Expire on_expire);
  // Stops the thread; items still watched are dropped (their probes destroyed unpolled).
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Watches one enqueued collective named `what` for at most `timeout` of running. The thread
  // starts with the first item.
  void watch(Probe probe, std::string what, std::chrono::milliseconds timeout);

  // Items not yet seen finished.
  std::size_t pending() const;
  // True once on_expire was called.
  bool expired() const;

 private:
  struct Item {
    Probe probe;
    std::string what;
    std::chrono::milliseconds timeout;
    bool running = false;
    Clock::time_point running_since{};
  };

  void run() noexcept;
  // One poll of the oldest item; false once the thread should end.
  bool poll_oldest(std::unique_lock<std::mutex>& lock);
  // Ends the watch on the oldest item (failed, or else timed out): drops every item and calls
  // on_expire_ without the lock. Returns false, for poll_oldest to return.
  bool expire(std::unique_lock<std::mutex>& lock, bool failed);
  // How long the thread sleeps between polls of an item with this timeout: a small part of it,
  // so that the abort comes soon after the timeout, and never busy.
  static std::chrono::milliseconds poll_interval(std::chrono::milliseconds timeout);

  Expire on_expire_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Item> items_;
  bool stopping_ = false;
  bool expired_ = false;
  std::thread thread_;
};

}  // namespace shardjit
