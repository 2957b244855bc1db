#include "runtime/ops/collective/peer_collective.hpp"

#include <algorithm>

#include "runtime/comm/collective_build.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/collective/kernels.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kConfigTextBytes = 512;

// One block per SM (at most the configured cap), the smallest of every rank's.
int agreed_grid(Communicator::Impl& comm, int cap) {
  const int sms = comm.device.info().sm_count;
  const std::int32_t mine = cap > 0 ? std::min(cap, sms) : sms;
  const std::vector<std::int32_t> all = exchange_records(comm, mine, "peer kernel grid exchange");
  return std::clamp<int>(*std::min_element(all.begin(), all.end()), 1, kernels::kMaxPeerSlots);
}

// The data part is followed by the signals, 256-byte aligned.
std::size_t signals_offset(std::size_t data_bytes) { return (data_bytes + 255) / 256 * 256; }

// Checks the config on every rank alike, then builds the peer collective.
PeerCollective make_peers(Runtime::Impl& runtime, Communicator::Impl& comm, const char* op_name,
                          const std::function<PeerCollectiveSetup()>& checked_setup) {
  PeerCollectiveSetup setup;
  run_on_every_rank(comm, std::string(op_name) + " config check", [&] { setup = checked_setup(); });
  return PeerCollective(runtime, comm, setup);
}

}  // namespace

void check_same_config(const std::vector<std::string>& texts, const char* op_name) {
  for (std::size_t r = 1; r < texts.size(); ++r) {
    if (texts[r] == texts[0]) continue;
    throw Error(ErrorCode::kInvalidArgument, std::string(op_name) + ": every rank must build the op with the same "
                                                 "config, but rank 0 has {" + texts[0] + "} and rank " +
                                                 std::to_string(r) + " has {" + texts[r] + "}");
  }
}

const char* collective_path_name(CollectivePath path) noexcept {
  switch (path) {
    case CollectivePath::kAuto: return "auto";
    case CollectivePath::kPeer: return "peer";
    case CollectivePath::kNccl: return "nccl";
  }
  return "unknown";
}

PeerCollective::PeerCollective(Runtime::Impl& runtime, Communicator::Impl& communicator,
                               const PeerCollectiveSetup& setup)
    : comm(communicator), device(communicator.device), op_name_(setup.op_name) {
  comm.check_usable(op_name_);
  // The status word first, agreed on: once a rank holds a symmetric buffer, a failure of its own
  // would pair its release exchange with its peers' next build exchange.
  run_on_every_rank(comm, std::string(op_name_) + " status word", [&] {
    ScopedContext scope(device);
    status_ = DeviceBuffer(device, sizeof(kernels::PeerStatus));
    SHARDJIT_CU(cuMemsetD8(status_.ptr(), 0, status_.bytes()));
  });
  const std::string text = setup.config_text + " world=" + std::to_string(comm.size);
  if (text.size() >= kConfigTextBytes) throw Error(ErrorCode::kInternal, std::string(op_name_) + ": config text too long");
  check_same_config(exchange_text(comm, text, kConfigTextBytes, "peer collective config exchange"), op_name_);
  grid_ = agreed_grid(comm, runtime.config.peer_blocks);

  std::string why_nccl;
  if (setup.requested == CollectivePath::kNccl) {
    why_nccl = "requested";
  } else if (comm.size < 2) {
    why_nccl = "one rank";
  } else if (setup.requested == CollectivePath::kAuto && setup.nccl_above_bytes > 0 &&
             setup.input_bytes > setup.nccl_above_bytes) {
    why_nccl = "the input is larger than nccl_above_bytes";
  } else {
    signals_offset_ = signals_offset(setup.data_bytes);
    symmetric_.emplace(comm, signals_offset_ + sizeof(kernels::PeerSignals));
    if (!symmetric_->peer_access()) {
      why_nccl = symmetric_->no_access_reason();
      symmetric_.reset();
      if (setup.requested == CollectivePath::kPeer) {
        throw Error(ErrorCode::kCommError, std::string(op_name_) + ": the peer path was requested, but " + why_nccl);
      }
    }
  }
  path_ = why_nccl.empty() ? CollectivePath::kPeer : CollectivePath::kNccl;
  if (comm.rank == 0) {
    log().info("{} ({} ranks): {} path{}", op_name_, comm.size,
               path_ == CollectivePath::kPeer ? "peer-memory (NVLink/P2P)" : "NCCL",
               why_nccl.empty() ? std::string() : " (" + why_nccl + ")");
  }
}

void* PeerCollective::data_on(int r) const {
  return reinterpret_cast<void*>(symmetric_->on_rank(r));
}

kernels::PeerSync PeerCollective::sync() const {
  kernels::PeerSync s{};
  s.status = status();
  s.timeout_ns = static_cast<unsigned long long>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(comm.options.timeout).count());
  s.rank = comm.rank;
  s.world = 0;
  if (!peer()) return s;
  s.world = comm.size;
  for (int r = 0; r < comm.size; ++r) {
    s.signals[r] = reinterpret_cast<kernels::PeerSignals*>(symmetric_->on_rank(r) + signals_offset_);
  }
  return s;
}

void check_collective_view(const char* op, const MatrixView& view, const char* name, DType dtype, std::int64_t rows,
                           std::int64_t cols, int align) {
  const std::string where = std::string(op) + ": " + name;
  if (view.rows < 0) {
    throw Error(ErrorCode::kInvalidArgument, where + " has " + std::to_string(view.rows) + " rows; expected >= 0");
  }
  if (view.data == nullptr) {
    if (rows > 0) throw Error(ErrorCode::kInvalidArgument, where + " is null");
    return;
  }
  if (view.dtype != dtype) {
    throw Error(ErrorCode::kInvalidArgument, where + " has dtype " + dtype_name(view.dtype) + "; expected " +
                                                 dtype_name(dtype));
  }
  if (view.rows != rows || view.cols != cols) {
    throw Error(ErrorCode::kInvalidArgument, where + " is [" + std::to_string(view.rows) + ", " +
                                                 std::to_string(view.cols) + "]; expected [" + std::to_string(rows) +
                                                 ", " + std::to_string(cols) + "]");
  }
  if (view.row_stride != 0 && view.row_stride != cols) {
    throw Error(ErrorCode::kInvalidArgument, where + " has row_stride " + std::to_string(view.row_stride) +
                                                 "; expected packed rows (0 or " + std::to_string(cols) + ")");
  }
  if (reinterpret_cast<std::uintptr_t>(view.data) % static_cast<std::uintptr_t>(align) != 0) {
    throw Error(ErrorCode::kInvalidArgument, where + " is not " + std::to_string(align) + "-byte aligned");
  }
}

void PeerCollective::check_view(const MatrixView& view, const char* name, DType dtype, std::int64_t rows,
                                std::int64_t cols, int align) const {
  check_collective_view(op_name_, view, name, dtype, rows, cols, align);
}

void PeerCollective::check_usable(const char* what) const {
  comm.check_usable(what);
  if (broken_) {
    throw Error(ErrorCode::kCommError, std::string(op_name_) + "::" + what +
                                           ": an earlier call gave up waiting for a peer; build the op again");
  }
}


PeerCollectiveOp::PeerCollectiveOp(Runtime::Impl& runtime, Communicator::Impl& comm, const char* op_name,
                                   std::int64_t hidden, DType dtype,
                                   const std::function<PeerCollectiveSetup()>& checked_setup)
    : peers(make_peers(runtime, comm, op_name, checked_setup)),
      row_bytes(hidden * static_cast<std::int64_t>(dtype_size(dtype))),
      vec_bytes(collective_vector_bytes(row_bytes, op_name)) {}

kernels::PeerStatus PeerCollective::check(CUstream stream, const char* what) {
  ScopedContext scope(device);
  check_wait_outside_capture(stream, what);
  comm.wait_stream(stream, what);
  kernels::PeerStatus status{};
  SHARDJIT_CU(cuMemcpyDtoHAsync(&status, status_.ptr(), sizeof(status), stream));
  SHARDJIT_CU(cuMemsetD8Async(status_.ptr(), 0, sizeof(status), stream));
  SHARDJIT_CU(cuStreamSynchronize(stream));
  if (status.timeouts > 0) {
    broken_ = true;
    comm.fail(std::string(op_name_) + " (rank " + std::to_string(comm.rank) + " of " + std::to_string(comm.size) +
              "): " + std::to_string(status.timeouts) + " kernel blocks gave up waiting for a peer after " +
              std::to_string(comm.options.timeout.count()) +
              " ms (a peer is dead, missing, or did not make the same calls); the outputs of that call are NaN");
  }
  return status;
}

}  // namespace shardjit
