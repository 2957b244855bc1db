// Communicator::Impl: an NCCL communicator on one device, its stream, and the checked, bounded
// operations the ops use: collectives enqueued on a stream, host waits with a deadline, and the
// exchange of fixed-size records that TP ops do once, when they are built.
//
// The collectives a created communicator enqueues are followed by a CollectiveWatchdog, whose
// thread may abort the communicator while the caller's thread uses it: `comm_` and the abort's
// reason are guarded by a mutex, held for each NCCL call (never across a wait, nor across the
// abort's teardown: `aborted` is set under it first).
#pragma once

#include <cuda.h>
#include <nccl.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/comm/collective_watchdog.hpp"
#include "runtime/comm/nccl_library.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/driver/event_pool.hpp"
#include "runtime/driver/stream.hpp"
#include "shardjit/communicator.hpp"

namespace shardjit {

struct Communicator::Impl {
  // Takes `comm` (already initialized); `owned`: destroy or abort it here.
  Impl(const NcclApi& api, const DeviceContext& device, OwnedStream stream, ncclComm_t comm, bool owned,
       const CommOptions& options);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // Throws Error(kCommError) once the communicator was aborted.
  void check_usable(const char* what) const;
  // The ncclComm_t, null once aborted.
  ncclComm_t current() const;

  // Enqueue on `stream` (the communicator's own, normally); no host wait unless NCCL reports
  // the call still in progress (a non-blocking communicator setting up a connection), which is
  // waited out within the timeout. `send` may be the rank's slot of `recv` (in place).
  void all_gather(const void* send, void* recv, std::size_t bytes_per_rank, CUstream stream);
  void all_reduce_sum(void* data, std::size_t count, ncclDataType_t type, CUstream stream);
  // Rank r receives into `recv` the sum over ranks of `send`'s block r, the blocks being
  // counts[0], counts[1], ... elements of `type` from the start of `send`: one ncclReduceScatter
  // when the blocks are equal, else one ncclReduce per block in a group.
  void reduce_scatter_sum(const void* send, void* recv, const std::vector<std::size_t>& counts, ncclDataType_t type,
                          CUstream stream);

  // Waits on the host until `stream` has finished its work, for at most the timeout; also
  // stops early on an asynchronous NCCL error. On failure aborts (if owned) and throws
  // Error(kCommError) naming `what`.
  void wait_stream(CUstream stream, const char* what);

  // Every rank's `bytes` bytes of `mine`, in rank order (an all-gather through a small device
  // buffer, waited for within the timeout). For op builds only: it waits on the host.
  std::vector<std::byte> exchange(const void* mine, std::size_t bytes, const char* what);

  // Aborts the communicator (owned: ncclCommAbort; wrapped: only marks it) and throws
  // Error(kCommError) with `message`, plus what was done about the communicator.
  [[noreturn]] void fail(const std::string& message);
  void abort(const std::string& reason) noexcept;

  const NcclApi& api;
  const DeviceContext& device;
  OwnedStream stream;
  bool owned = false;
  int rank = 0;
  int size = 1;
  CommOptions options;
  std::atomic<bool> aborted{false};

 private:
  // Calls `call(comm)` under the mutex unless the communicator was aborted (then raises as
  // check_usable(name)), then finishes its result.
  template <class Call>
  void enqueue(const char* name, Call&& call);
  // enqueue() of the collective `name` on `stream`, followed by the watchdog: an event before it
  // (when it starts running) and one after it (when it has finished).
  template <class Call>
  void collective(const char* name, CUstream stream, Call&& call);
  // Whether the watchdog follows the collectives enqueued on `stream` now: not those of a
  // wrapped communicator, nor those captured into a graph (they run at its launch).
  bool follows(CUstream stream) noexcept;
  // An event of the pool recorded on `stream` now, or null where that failed: following a
  // collective is best effort and never fails its call.
  std::shared_ptr<OwnedEvent> mark(CUstream stream) noexcept;
  // After an NCCL call: raises on an error, waits out ncclInProgress.
  void finish(ncclResult_t result, const char* call);
  // ncclCommGetAsyncError under the mutex; ncclSuccess once aborted (the waits then stop on
  // `aborted` and check_usable names the reason).
  ncclResult_t async_error();
  // For the watchdog's probes: whether NCCL reports an error (not ncclInProgress) on the
  // communicator, asked only when the mutex is free now; false once aborted.
  bool reported_failure() noexcept;
  // Hands the collective just enqueued on `stream` (named `what`, marked `started` before it) to
  // the watchdog.
  void watch(CUstream stream, const char* what, std::shared_ptr<OwnedEvent> started) noexcept;
  std::string who() const;
  std::string timeout_text() const;

  mutable std::mutex mutex_;  // guards comm_ and abort_reason_
  ncclComm_t comm_ = nullptr;
  std::string abort_reason_;
  EventPool events_;
  // Declared last: destroyed (its thread stopped) before the events it may still hold.
  std::unique_ptr<CollectiveWatchdog> watchdog_;
};

}  // namespace shardjit
