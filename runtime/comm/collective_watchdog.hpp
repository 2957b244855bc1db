// CollectiveWatchdog: a thread that watches the NCCL collectives a communicator has enqueued and
// aborts the communicator when one makes no progress for its timeout.
//
// Why: every host-side wait of shardjit on a peer is bounded, but a caller may wait on its own
// (cudaStreamSynchronize, a framework's event), and an NCCL kernel waiting for a dead peer
// spins forever. Aborting the communicator (ncclCommAbort) ends that kernel, so such a wait
// returns; the op's next call or check() then raises Error(kCommError) naming the collective.
//
// A watched item is a probe, polled from the watchdog's thread until it reports the work done.
// Items finish in the order they were enqueued (one stream), so only the oldest is polled. Its
// clock starts when it was enqueued or when the one before it finished, whichever is later: a
// deep queue of calls, each quick, is progress, not a hang. The timeout is the communicator's
// at the time of the enqueue.
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
  // True once the watched work has finished. Called from the watchdog's thread; it must not
  // throw (an error counts as finished: the work is no longer waiting on a peer).
  using Probe = std::function<bool()>;
  // Called once, from the watchdog's thread, with the name of the item that timed out and the
  // time it was given; the watchdog stops watching after it.
  using Expire = std::function<void(const std::string& what, std::chrono::milliseconds timeout)>;

  explicit CollectiveWatchdog(Expire on_expire);
  // Stops the thread; items still watched are dropped (their probes destroyed unpolled).
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Watches one enqueued collective named `what` for at most `timeout` without progress. The
  // thread starts with the first item.
  void watch(Probe done, std::string what, std::chrono::milliseconds timeout);

  // Items not yet seen finished.
  std::size_t pending() const;
  // True once on_expire was called.
  bool expired() const;

 private:
  struct Item {
    Probe done;
    std::string what;
    std::chrono::milliseconds timeout;
    Clock::time_point enqueued;
  };

  void run();
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
