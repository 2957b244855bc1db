#include "runtime/comm/communicator_impl.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/comm/bounded_wait.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

Communicator::Impl::Impl(const NcclApi& nccl_api, const DeviceContext& context, OwnedStream comm_stream,
                         ncclComm_t nccl_comm, bool owns, const CommOptions& comm_options)
    : api(nccl_api),
      device(context),
      stream(std::move(comm_stream)),
      comm(nccl_comm),
      owned(owns),
      options(comm_options) {
  check_nccl(api, api.ncclCommUserRank(comm, &rank), "ncclCommUserRank", comm);
  check_nccl(api, api.ncclCommCount(comm, &size), "ncclCommCount", comm);
}

Communicator::Impl::~Impl() {
  if (!owned || comm == nullptr || aborted.load()) return;
  // Finalize flushes what is still queued; a peer that is gone makes it time out, and then the
  // communicator is aborted rather than left hanging in a destructor.
  try {
    ScopedContext scope(device);
    ncclResult_t state = api.ncclCommFinalize(comm);
    auto settled = [&] {
      api.ncclCommGetAsyncError(comm, &state);
      return state != ncclInProgress;
    };
    const bool started = state == ncclSuccess || state == ncclInProgress;
    const bool done = started && wait_until(settled, options.timeout);
    if (done && state == ncclSuccess) {
      api.ncclCommDestroy(comm);
    } else {
      log().warn("NCCL communicator (rank {} of {}) did not finalize ({}); aborting it", rank, size,
                 done || !started ? api.ncclGetErrorString(state) : "timed out");
      api.ncclCommAbort(comm);
    }
  } catch (const std::exception& e) {
    log().warn("destroying an NCCL communicator failed: {}", e.what());
  }
  comm = nullptr;
}

std::string Communicator::Impl::timeout_text() const {
  return std::to_string(options.timeout.count()) + " ms";
}

void Communicator::Impl::check_usable(const char* what) const {
  if (aborted.load()) {
    throw Error(ErrorCode::kCommError, std::string(what) + ": the communicator (rank " + std::to_string(rank) +
                                           " of " + std::to_string(size) + ") was aborted earlier: " + abort_reason);
  }
}

void Communicator::Impl::abort(const std::string& reason) noexcept {
  if (aborted.exchange(true)) return;
  abort_reason = reason;
  if (!owned || comm == nullptr) return;
  try {
    ScopedContext scope(device);
    api.ncclCommAbort(comm);
  } catch (const std::exception& e) {
    log().warn("aborting an NCCL communicator failed: {}", e.what());
  }
  comm = nullptr;
}

void Communicator::Impl::fail(const std::string& message) {
  abort(message);
  const std::string done = owned ? "; the communicator was aborted (build a new one to continue)"
                                 : "; the NCCL communicator belongs to the caller and was not aborted: abort it "
                                   "(ncclCommAbort) before reuse";
  throw Error(ErrorCode::kCommError, message + done);
}

void Communicator::Impl::finish(ncclResult_t result, const char* call) {
  if (result == ncclInProgress) {
    ncclResult_t state = ncclInProgress;
    const bool done = wait_until(
        [&] {
          api.ncclCommGetAsyncError(comm, &state);
          return state != ncclInProgress;
        },
        options.timeout);
    if (!done) {
      fail(std::string(call) + " (rank " + std::to_string(rank) + " of " + std::to_string(size) +
           ") was still in progress after " + timeout_text() + ": a peer is missing or dead");
    }
    result = state;
  }
  if (result != ncclSuccess) {
    try {
      check_nccl(api, result, call, comm);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
}

void Communicator::Impl::all_gather(const void* send, void* recv, std::size_t bytes_per_rank, CUstream on) {
  check_usable("ncclAllGather");
  finish(api.ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm, on), "ncclAllGather");
}

void Communicator::Impl::all_reduce_sum(void* data, std::size_t count, ncclDataType_t type, CUstream on) {
  check_usable("ncclAllReduce");
  finish(api.ncclAllReduce(data, data, count, type, ncclSum, comm, on), "ncclAllReduce");
}

void Communicator::Impl::reduce_scatter_sum(const void* send, void* recv, const std::vector<std::size_t>& counts,
                                            ncclDataType_t type, CUstream on) {
  check_usable("ncclReduceScatter");
  if (counts.size() != static_cast<std::size_t>(size)) {
    throw Error(ErrorCode::kInternal, "reduce_scatter_sum: " + std::to_string(counts.size()) + " blocks for " +
                                          std::to_string(size) + " ranks");
  }
  if (std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; })) {
    finish(api.ncclReduceScatter(send, recv, counts[0], type, ncclSum, comm, on), "ncclReduceScatter");
    return;
  }
  const std::size_t element = nccl_type_size(type);
  finish(api.ncclGroupStart(), "ncclGroupStart");
  std::size_t offset = 0;
  for (int root = 0; root < size; ++root) {
    const std::size_t count = counts[static_cast<std::size_t>(root)];
    const void* block = static_cast<const char*>(send) + offset * element;
    finish(api.ncclReduce(block, root == rank ? recv : nullptr, count, type, ncclSum, root, comm, on), "ncclReduce");
    offset += count;
  }
  finish(api.ncclGroupEnd(), "ncclGroupEnd");
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
        api.ncclCommGetAsyncError(comm, &nccl_state);
        return nccl_state != ncclSuccess && nccl_state != ncclInProgress;
      },
      options.timeout);
  const std::string where = std::string(what) + " (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
  if (!done) {
    fail(where + ": the GPU work did not finish within " + timeout_text() +
         "; a collective is waiting for a peer that is dead, missing, or did not make the same calls in the same "
         "order");
  }
  if (nccl_state != ncclSuccess && nccl_state != ncclInProgress) {
    const char* last = api.ncclGetLastError(comm);
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
