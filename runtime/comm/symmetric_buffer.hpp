// A symmetric buffer: device memory of the same size on every rank of a communicator, which
// every rank's kernels read and write directly (over NVLink) through CUDA IPC mappings. Each
// rank allocates and zeroes its part, exports a CUDA IPC handle, the handles travel through the
// communicator (one all-gather), and every rank opens every peer's. Whether that worked for every
// pair is then agreed on, so peer_access() is the same on every rank: false when the ranks are
// on different hosts, or a peer's memory cannot be mapped here (no P2P path, a container
// boundary, a driver that refuses); the caller then takes its NCCL path.
//
// Building and destroying are collective: every rank does both, in the same order, with the same
// size. Peers' memory is opened once, here, never per call, and all before any use of the
// buffer, so a graph capture never meets a half-registered group.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/comm/communicator_impl.hpp"
#include "runtime/driver/device.hpp"

namespace shardjit {

class SymmetricBuffer {
 public:
  // Collective. Allocates `bytes` (zeroed) on this rank; maps every peer's part when it can.
  SymmetricBuffer(Communicator::Impl& comm, std::size_t bytes);
  // Collective: waits for this device's work, closes the peers' mappings, waits (bounded by the
  // communicator's timeout) until every rank has closed its mapping of this rank's memory, then
  // frees it. Errors are logged, never thrown.
  ~SymmetricBuffer();
  SymmetricBuffer(const SymmetricBuffer&) = delete;
  SymmetricBuffer& operator=(const SymmetricBuffer&) = delete;

  // True on every rank when every rank mapped every peer's part; the same on every rank.
  bool peer_access() const { return peer_access_; }
  // Why not (the same text on every rank); empty with peer access.
  const std::string& no_access_reason() const { return no_access_reason_; }

  std::size_t bytes() const { return bytes_; }
  // This rank's part.
  CUdeviceptr local() const { return local_.ptr(); }
  // Rank r's part as mapped here (local() for this rank); only with peer_access().
  CUdeviceptr on_rank(int r) const { return mapped_[static_cast<std::size_t>(r)]; }

 private:
  void close_peers() noexcept;
  Communicator::Impl& comm_;
  std::size_t bytes_ = 0;
  DeviceBuffer local_;
  std::vector<CUdeviceptr> mapped_;  // per rank; 0 where not mapped
  bool peer_access_ = false;
  std::string no_access_reason_;
};

}  // namespace shardjit
