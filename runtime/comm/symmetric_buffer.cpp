#include "runtime/comm/symmetric_buffer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include "runtime/comm/collective_build.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kReasonBytes = 200;

// What a rank publishes: where it runs and the handle of its part, or why it has none.
struct Export {
  char host[128];  // hostname and boot id: IPC handles only mean something on the same boot
  CUipcMemHandle handle;
  std::int32_t ok;
  char reason[kReasonBytes];
};

// After opening the peers' handles.
struct Opened {
  std::int32_t ok;
  char reason[kReasonBytes];
};

void copy_text(char* to, std::size_t capacity, const std::string& text) {
  std::memset(to, 0, capacity);
  std::memcpy(to, text.data(), std::min(text.size(), capacity - 1));
}

std::string text_of(const char* from, std::size_t capacity) { return std::string(from, strnlen(from, capacity)); }

std::string host_identity() {
  char name[64] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return std::string(name) + "/" + boot;
}

std::string cu_error_text(CUresult rc) {
  const char* name = nullptr;
  driver().cuGetErrorName(rc, &name);
  return name != nullptr ? name : "CUDA error " + std::to_string(static_cast<int>(rc));
}

}  // namespace

SymmetricBuffer::SymmetricBuffer(Communicator::Impl& comm, std::size_t bytes)
    : comm_(comm), bytes_(bytes), mapped_(static_cast<std::size_t>(comm.size), 0) {
  ScopedContext scope(comm.device);
  const DriverApi& cu = driver();

  // 1. This rank's part, zeroed (the barrier flags in it start at epoch 0) before anyone sees it.
  Export mine;
  std::memset(&mine, 0, sizeof(mine));
  copy_text(mine.host, sizeof(mine.host), host_identity());
  std::optional<Error> failure;
  try {
    local_ = DeviceBuffer(comm.device, bytes);
    SHARDJIT_CU(cuMemsetD8(local_.ptr(), 0, bytes));
    SHARDJIT_CU(cuCtxSynchronize());
    const CUresult rc = cu.cuIpcGetMemHandle(&mine.handle, local_.ptr());
    mine.ok = rc == CUDA_SUCCESS;
    if (!mine.ok) copy_text(mine.reason, kReasonBytes, "cuIpcGetMemHandle: " + cu_error_text(rc));
  } catch (const Error& e) {
    failure.emplace(e.code(), e.what());
  }
  agree_on_outcome(comm, failure, "allocating a symmetric buffer");
  mapped_[static_cast<std::size_t>(comm.rank)] = local_.ptr();

  // 2. Every rank's handle; open the peers' (same host only).
  const std::vector<Export> all = exchange_records(comm, mine, "symmetric buffer handle exchange");
  Opened opened{1, {}};
  for (int r = 0; r < comm.size && opened.ok; ++r) {
    const Export& peer = all[static_cast<std::size_t>(r)];
    std::string reason;
    if (r == comm.rank) continue;
    if (!peer.ok) {
      reason = "rank " + std::to_string(r) + " could not export its memory (" + text_of(peer.reason, kReasonBytes) + ")";
    } else if (std::strncmp(peer.host, mine.host, sizeof(mine.host)) != 0) {
      reason = "rank " + std::to_string(r) + " runs on another host";
    } else {
      CUdeviceptr ptr = 0;
      const CUresult rc = cu.cuIpcOpenMemHandle(&ptr, peer.handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      if (rc == CUDA_SUCCESS) {
        mapped_[static_cast<std::size_t>(r)] = ptr;
        continue;
      }
      reason = "rank " + std::to_string(comm.rank) + " cannot map rank " + std::to_string(r) +
               "'s memory (cuIpcOpenMemHandle: " + cu_error_text(rc) + ")";
    }
    opened.ok = 0;
    copy_text(opened.reason, kReasonBytes, reason);
  }

  // 3. Agree: peer access only if every rank mapped every peer. (A failed exchange leaves no
  // mapping open: the destructor does not run for a half-built object.)
  std::vector<Opened> outcomes;
  try {
    outcomes = exchange_records(comm, opened, "symmetric buffer mapping agreement");
  } catch (...) {
    close_peers();
    throw;
  }
  peer_access_ = true;
  for (const Opened& o : outcomes) {
    if (o.ok) continue;
    if (peer_access_) no_access_reason_ = text_of(o.reason, kReasonBytes);
    peer_access_ = false;
  }
  if (!peer_access_) close_peers();
}

void SymmetricBuffer::close_peers() noexcept {
  for (std::size_t r = 0; r < mapped_.size(); ++r) {
    if (static_cast<int>(r) == comm_.rank || mapped_[r] == 0) continue;
    const CUresult rc = driver().cuIpcCloseMemHandle(mapped_[r]);
    if (rc != CUDA_SUCCESS) log().warn("closing the mapping of rank {}'s symmetric buffer: {}", r, cu_error_text(rc));
    mapped_[r] = 0;
  }
}

SymmetricBuffer::~SymmetricBuffer() {
  try {
    ScopedContext scope(comm_.device);
    // Kernels of this rank may still read the peers' parts; the peers may still read ours.
    SHARDJIT_CU(cuCtxSynchronize());
    close_peers();
    if (!comm_.aborted.load()) {
      const char done = 1;
      comm_.exchange(&done, 1, "releasing a symmetric buffer");
    }
  } catch (const std::exception& e) {
    log().warn("releasing a symmetric buffer (rank {} of {}): {}", comm_.rank, comm_.size, e.what());
  }
}

}  // namespace shardjit
