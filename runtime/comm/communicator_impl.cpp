#include "runtime/comm/communicator_impl.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "runtime/comm/bounded_wait.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

Communicator::Impl::Impl(const NcclApi& nccl_api, const DeviceContext& context, OwnedStream comm_stream,
                         ncclComm_t nccl_comm, bool owns, const CommOptions& comm_options)
    : api(nccl_api),
      device(context),
      stream(std::move(comm_stream)),
      owned(owns),
      options(comm_options),
      comm_(nccl_comm),
      events_(context) {
  check_nccl(api, api.ncclCommUserRank(comm_, &rank), "ncclCommUserRank", comm_);
  check_nccl(api, api.ncclCommCount(comm_, &size), "ncclCommCount", comm_);
  // A wrapped communicator is the caller's to abort; nothing follows its collectives.
  if (owned) {
    watchdog_ = std::make_unique<CollectiveWatchdog>([this](const CollectiveWatchdog::Expiry& expiry) {
      if (aborted.load()) return;  // a wait of the caller's thread got there first and said so
      const std::string reason =
          expiry.failed
              ? expiry.what + " cannot finish: NCCL reported " + api.ncclGetErrorString(async_error()) +
                    " on its communicator; the watchdog aborted the communicator"
              : expiry.what + " did not finish within " + std::to_string(expiry.timeout.count()) +
                    " ms of starting to run; the watchdog aborted the communicator: a peer is dead, "
                    "missing, or did not make the same calls in the same order";
      log().error("{}", reason);
      abort(reason);
    });
  }
}

Communicator::Impl::~Impl() {
  // No abort from the watchdog's thread from here on.
  watchdog_.reset();
  if (!owned || comm_ == nullptr || aborted.load()) return;
  // Finalize flushes what is still queued; a peer that is gone makes it time out, and then the
  // communicator is aborted rather than left hanging in a destructor.
  try {
    ScopedContext scope(device);
    ncclResult_t state = api.ncclCommFinalize(comm_);
    auto settled = [&] {
      api.ncclCommGetAsyncError(comm_, &state);
      return state != ncclInProgress;
    };
    const bool started = state == ncclSuccess || state == ncclInProgress;
    const bool done = started && wait_until(settled, options.timeout);
    if (done && state == ncclSuccess) {
      api.ncclCommDestroy(comm_);
    } else {
      log().warn("NCCL communicator (rank {} of {}) did not finalize ({}); aborting it", rank, size,
                 done || !started ? api.ncclGetErrorString(state) : "timed out");
      api.ncclCommAbort(comm_);
    }
  } catch (const std::exception& e) {
    log().warn("destroying an NCCL communicator failed: {}", e.what());
  }
  comm_ = nullptr;
}

std::string Communicator::Impl::who() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(size);
}

std::string Communicator::Impl::timeout_text() const {
  return std::to_string(options.timeout.count()) + " ms";
}

void Communicator::Impl::check_usable(const char* what) const {
  if (!aborted.load()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  throw Error(ErrorCode::kCommError,
              std::string(what) + ": the communicator (" + who() + ") was aborted earlier: " + abort_reason_);
}

ncclComm_t Communicator::Impl::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comm_;
}

void Communicator::Impl::abort(const std::string& reason) noexcept {
  ncclComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted.load()) return;
    try {
      abort_reason_ = reason;
    } catch (...) {
      // Out of memory for the message: the abort itself still happens.
    }
    aborted.store(true);
    if (owned) comm = std::exchange(comm_, nullptr);
  }
  // Outside the mutex: the teardown may take a while, and the other thread's calls, which see
  // `aborted` under the mutex first, no longer reach this communicator.
  if (comm == nullptr) return;
  try {
    ScopedContext scope(device);
    api.ncclCommAbort(comm);
  } catch (const std::exception& e) {
    log().warn("aborting an NCCL communicator failed: {}", e.what());
  }
}

void Communicator::Impl::fail(const std::string& message) {
  abort(message);
  const std::string done = owned ? "; the communicator was aborted (build a new one to continue)"
                                 : "; the NCCL communicator belongs to the caller and was not aborted: abort it "
                                   "(ncclCommAbort) before reuse";
  throw Error(ErrorCode::kCommError, message + done);
}

ncclResult_t Communicator::Impl::async_error() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ == nullptr || aborted.load()) return ncclSuccess;
  ncclResult_t state = ncclSuccess;
  api.ncclCommGetAsyncError(comm_, &state);
  return state;
}

bool Communicator::Impl::reported_failure() noexcept {
  // Asked between the watchdog's polls: a call of the caller's thread that holds the mutex now
  // is not waited for, the next poll asks again.
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || comm_ == nullptr || aborted.load()) return false;
  ncclResult_t state = ncclSuccess;
  if (api.ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return false;
  return state != ncclSuccess && state != ncclInProgress;
}

void Communicator::Impl::finish(ncclResult_t result, const char* call) {
  if (result == ncclInProgress) {
    ncclResult_t state = ncclInProgress;
    const bool done = wait_until(
        [&] {
          state = async_error();
          return state != ncclInProgress || aborted.load();
        },
        options.timeout);
    check_usable(call);
    if (!done) {
      fail(std::string(call) + " (" + who() + ") was still in progress after " + timeout_text() +
           ": a peer is missing or dead");
    }
    result = state;
  }
  if (result != ncclSuccess) {
    try {
      check_nccl(api, result, call, current());
    } catch (const Error& e) {
      fail(e.what());
    }
  }
}

template <class Call>
void Communicator::Impl::enqueue(const char* name, Call&& call) {
  ncclResult_t result = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!aborted.load()) result = call(comm_);
  }
  check_usable(name);
  finish(result, name);
}

bool Communicator::Impl::follows(CUstream on) noexcept {
  // A captured collective runs when the graph is launched, which this enqueue does not see.
  try {
    return watchdog_ != nullptr && !stream_is_capturing(on);
  } catch (const std::exception& e) {
    log().warn("the watchdog cannot follow a collective: {}", e.what());
    return false;
  }
}

std::shared_ptr<OwnedEvent> Communicator::Impl::mark(CUstream on) noexcept {
  try {
    std::shared_ptr<OwnedEvent> event = events_.take();
    if (driver().cuEventRecord(event->get(), on) != CUDA_SUCCESS) return nullptr;
    return event;
  } catch (const std::exception& e) {
    log().warn("the watchdog cannot follow a collective: {}", e.what());
    return nullptr;
  }
}

namespace {

// Where a collective between the events `started` and `finished` (on one stream) is, seen from the
// watchdog's thread.
CollectiveWatchdog::Progress collective_progress(const DeviceContext& device, CUevent started,
                                                 CUevent finished) noexcept {
  using Progress = CollectiveWatchdog::Progress;
  try {
    ScopedContext scope(device);
    // A query is an unsafe call for a stream capture in global mode on another thread, which it
    // would invalidate; this thread's calls stay out of such captures.
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    driver().cuThreadExchangeStreamCaptureMode(&mode);
    const CUresult end = driver().cuEventQuery(finished);
    if (end == CUDA_SUCCESS) return Progress::kFinished;
    // Refused because of a capture after all: no news, so no clock either.
    if (end == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT || end == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
      return Progress::kQueued;
    }
    if (end != CUDA_ERROR_NOT_READY) return Progress::kFinished;  // nothing to learn from it
    return driver().cuEventQuery(started) == CUDA_SUCCESS ? Progress::kRunning : Progress::kQueued;
  } catch (...) {
    return Progress::kFinished;
  }
}

}  // namespace

void Communicator::Impl::watch(CUstream on, const char* what, std::shared_ptr<OwnedEvent> started) noexcept {
  if (started == nullptr) return;
  std::shared_ptr<OwnedEvent> finished = mark(on);
  if (finished == nullptr) return;
  try {
    // The watchdog is destroyed first in ~Impl, so its probes may hold `this`.
    watchdog_->watch(
        [this, started, finished]() noexcept {
          const CollectiveWatchdog::Progress progress = collective_progress(device, started->get(), finished->get());
          if (progress == CollectiveWatchdog::Progress::kFinished) return progress;
          return reported_failure() ? CollectiveWatchdog::Progress::kFailed : progress;
        },
        std::string(what) + " (" + who() + ")", options.timeout);
  } catch (const std::exception& e) {
    log().warn("the watchdog cannot follow a collective: {}", e.what());
  }
}

template <class Call>
void Communicator::Impl::collective(const char* name, CUstream on, Call&& call) {
  std::shared_ptr<OwnedEvent> started = follows(on) ? mark(on) : nullptr;
  enqueue(name, call);
  watch(on, name, std::move(started));
}

void Communicator::Impl::all_gather(const void* send, void* recv, std::size_t bytes_per_rank, CUstream on) {
  collective("ncclAllGather", on,
             [&](ncclComm_t c) { return api.ncclAllGather(send, recv, bytes_per_rank, ncclUint8, c, on); });
}

void Communicator::Impl::all_reduce_sum(void* data, std::size_t count, ncclDataType_t type, CUstream on) {
  collective("ncclAllReduce", on,
             [&](ncclComm_t c) { return api.ncclAllReduce(data, data, count, type, ncclSum, c, on); });
}

void Communicator::Impl::reduce_scatter_sum(const void* send, void* recv, const std::vector<std::size_t>& counts,
                                            ncclDataType_t type, CUstream on) {
  check_usable("ncclReduceScatter");
  if (counts.size() != static_cast<std::size_t>(size)) {
    throw Error(ErrorCode::kInternal, "reduce_scatter_sum: " + std::to_string(counts.size()) + " blocks for " +
                                          std::to_string(size) + " ranks");
  }
  if (std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; })) {
    collective("ncclReduceScatter", on, [&](ncclComm_t c) {
      return api.ncclReduceScatter(send, recv, counts[0], type, ncclSum, c, on);
    });
    return;
  }
  // One group, made under one hold of the mutex: an abort between its calls would leave this
  // thread's NCCL group open, with calls on a freed communicator in it. The group is closed even
  // after a failed call; the first failure is the result.
  const std::size_t element = nccl_type_size(type);
  collective("ncclReduce (one per rank's block, grouped)", on, [&](ncclComm_t c) {
    ncclResult_t result = api.ncclGroupStart();
    if (result != ncclSuccess) return result;
    std::size_t offset = 0;
    for (int root = 0; root < size; ++root) {
      const std::size_t count = counts[static_cast<std::size_t>(root)];
      const void* block = static_cast<const char*>(send) + offset * element;
      const ncclResult_t reduce = api.ncclReduce(block, root == rank ? recv : nullptr, count, type, ncclSum, root, c, on);
      if (result == ncclSuccess) result = reduce;
      offset += count;
    }
    const ncclResult_t end = api.ncclGroupEnd();
    return result == ncclSuccess ? end : result;
  });
}

void Communicator::Impl::wait_stream(CUstream on, const char* what) {
  check_usable(what);
  const DriverApi& cu = driver();
  ncclResult_t nccl_state = ncclSuccess;
  const bool done = wait_until(
      [&] {
        const CUresult rc = cu.cuStreamQuery(on);
        if (rc == CUDA_SUCCESS) return true;
        if (rc != CUDA_ERROR_NOT_READY) check_cu(rc, "cuStreamQuery");
        nccl_state = async_error();
        return (nccl_state != ncclSuccess && nccl_state != ncclInProgress) || aborted.load();
      },
      options.timeout);
  check_usable(what);
  const std::string where = std::string(what) + " (" + who() + ")";
  if (!done) {
    fail(where + ": the GPU work did not finish within " + timeout_text() +
         "; a collective is waiting for a peer that is dead, missing, or did not make the same calls in the same "
         "order");
  }
  if (nccl_state != ncclSuccess && nccl_state != ncclInProgress) {
    const char* last = api.ncclGetLastError(current());
    fail(where + ": NCCL reported " + api.ncclGetErrorString(nccl_state) +
         (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string()));
  }
}

std::vector<std::byte> Communicator::Impl::exchange(const void* mine, std::size_t bytes, const char* what) {
  check_usable(what);
  ScopedContext scope(device);
  const CUstream on = stream.get();
  // The copies below would wait for earlier work on the stream without a bound; drain it first.
  wait_stream(on, what);
  // Each rank's slot padded to 16 bytes: NCCL's kernels may read whole words past a tiny record.
  const std::size_t slot_bytes = std::max<std::size_t>(16, (bytes + 15) / 16 * 16);
  DeviceBuffer buffer(device, slot_bytes * static_cast<std::size_t>(size));
  SHARDJIT_CU(cuMemsetD8Async(buffer.ptr(), 0, buffer.bytes(), on));
  const CUdeviceptr slot = buffer.ptr() + slot_bytes * static_cast<std::size_t>(rank);
  SHARDJIT_CU(cuMemcpyHtoDAsync(slot, mine, bytes, on));
  all_gather(reinterpret_cast<const void*>(slot), buffer.as<void>(), slot_bytes, on);
  wait_stream(on, what);
  std::vector<std::byte> padded(buffer.bytes());
  SHARDJIT_CU(cuMemcpyDtoHAsync(padded.data(), buffer.ptr(), padded.size(), on));
  wait_stream(on, what);
  std::vector<std::byte> all(bytes * static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    std::memcpy(all.data() + bytes * static_cast<std::size_t>(r), padded.data() + slot_bytes * static_cast<std::size_t>(r), bytes);
  }
  return all;
}

}  // namespace shardjit
