// The public Communicator: making and joining NCCL groups with bounded waits.
#include "shardjit/communicator.hpp"

#include <cstring>
#include <string>

#include "runtime/comm/bounded_wait.hpp"
#include "runtime/comm/communicator_impl.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

static_assert(sizeof(CommUniqueId) == sizeof(ncclUniqueId), "CommUniqueId holds an ncclUniqueId");

void check_options(const CommOptions& options) {
  if (options.timeout.count() <= 0 || options.timeout > kMaxCommTimeout) {
    throw Error(ErrorCode::kInvalidArgument, "CommOptions::timeout = " + std::to_string(options.timeout.count()) +
                                                 " ms; expected a positive duration of at most " +
                                                 std::to_string(kMaxCommTimeout.count()) + " ms (a year)");
  }
}

// Joins the group without blocking, polling until it is done or the timeout has passed.
ncclComm_t join(const NcclApi& api, const DeviceContext& device, int rank, int size, const ncclUniqueId& id,
                const CommOptions& options) {
  const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(size);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ScopedContext scope(device);
  ncclComm_t comm = nullptr;
  const ncclResult_t rc = api.ncclCommInitRankConfig(&comm, size, id, rank, &config);
  auto give_up = [&](const std::string& message) {
    if (comm != nullptr) api.ncclCommAbort(comm);
    throw Error(ErrorCode::kCommError, message);
  };
  if (rc != ncclSuccess && rc != ncclInProgress) {
    const char* last = api.ncclGetLastError(comm);
    give_up("ncclCommInitRankConfig (" + who + ") failed: " + api.ncclGetErrorString(rc) +
            (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string()));
  }
  ncclResult_t state = rc;
  const bool done = wait_until(
      [&] {
        if (api.ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
        return state != ncclInProgress;
      },
      options.timeout);
  if (!done) {
    give_up("ncclCommInitRankConfig (" + who + ") did not complete within " + std::to_string(options.timeout.count()) +
            " ms: not every rank joined (a peer is missing, dead, or was given another unique id or group size)");
  }
  if (state != ncclSuccess) {
    const char* last = api.ncclGetLastError(comm);
    give_up("ncclCommInitRankConfig (" + who + ") failed: " + api.ncclGetErrorString(state) +
            (last != nullptr && *last != '\0' ? std::string(" (") + last + ")" : std::string()));
  }
  return comm;
}

}  // namespace

CommUniqueId Communicator::new_unique_id() {
  const NcclApi& api = nccl();
  ncclUniqueId id{};
  check_nccl(api, api.ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
  CommUniqueId bytes{};
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

Communicator Communicator::create(Runtime& runtime, int device, int rank, int size, const CommUniqueId& unique_id,
                                  const CommOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    throw Error(ErrorCode::kInvalidArgument, "Communicator: rank " + std::to_string(rank) + " of " +
                                                 std::to_string(size) + "; expected 0 <= rank < size");
  }
  check_options(options);
  const NcclApi& api = nccl();
  const DeviceContext& context = runtime.impl().device(device);
  OwnedStream stream(context);
  ncclUniqueId id{};
  std::memcpy(&id, unique_id.data(), sizeof(id));
  ncclComm_t comm = join(api, context, rank, size, id, options);
  try {
    return Communicator(std::make_unique<Impl>(api, context, std::move(stream), comm, true, options));
  } catch (...) {
    api.ncclCommAbort(comm);
    throw;
  }
}

Communicator Communicator::wrap(Runtime& runtime, void* nccl_comm, int device, const CommOptions& options) {
  if (nccl_comm == nullptr) throw Error(ErrorCode::kInvalidArgument, "Communicator::wrap: the ncclComm_t is null");
  check_options(options);
  const NcclApi& api = nccl();
  auto comm = static_cast<ncclComm_t>(nccl_comm);
  int comm_device = -1;
  check_nccl(api, api.ncclCommCuDevice(comm, &comm_device), "ncclCommCuDevice", comm);
  if (comm_device != device) {
    throw Error(ErrorCode::kInvalidArgument, "Communicator::wrap: the NCCL communicator was made for device " +
                                                 std::to_string(comm_device) + ", not device " +
                                                 std::to_string(device));
  }
  const DeviceContext& context = runtime.impl().device(device);
  OwnedStream stream(context);
  return Communicator(std::make_unique<Impl>(api, context, std::move(stream), comm, false, options));
}

Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&& other) noexcept = default;
Communicator& Communicator::operator=(Communicator&& other) noexcept = default;

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
int Communicator::device() const { return impl_->device.info().ordinal; }
const CommOptions& Communicator::options() const { return impl_->options; }

void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  CommOptions options = impl_->options;
  options.timeout = timeout;
  check_options(options);
  impl_->options = options;
}
StreamHandle Communicator::stream() const { return impl_->stream.get(); }
void* Communicator::nccl_comm() const { return impl_->current(); }
bool Communicator::aborted() const { return impl_->aborted.load(); }
void Communicator::abort() { impl_->abort("aborted by the caller"); }

}  // namespace shardjit
