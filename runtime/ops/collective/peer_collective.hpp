// What the cross-GPU ops (ReduceScatter, MoeCombine) share on the host: the collective build
// (config compared on every rank, path chosen alike everywhere and logged once), the symmetric
// buffer with the barrier signals at its end, the status word, the launch grid, the per-call
// view checks and check(), and what their ops hold alike (PeerCollectiveOp).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective/peer_sync_args.cuh"
#include "runtime/comm/communicator_impl.hpp"
#include "runtime/comm/symmetric_buffer.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/single_caller.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/scheduler.hpp"
#include "shardjit/collective_path.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

struct PeerCollectiveSetup {
  const char* op_name;              // "ReduceScatter", for messages and logs
  std::string config_text;          // every setting that must agree between ranks
  CollectivePath requested = CollectivePath::kAuto;
  std::size_t input_bytes = 0;      // what one call moves, compared with nccl_above_bytes
  std::size_t nccl_above_bytes = 0; // kAuto takes NCCL for inputs larger than this; 0: never
  std::size_t data_bytes = 0;       // of the symmetric buffer, before its signals
};

// Throws the same Error(kInvalidArgument) on every rank (each compares the same texts) unless
// every rank's config text equals rank 0's; the message shows both.
void check_same_config(const std::vector<std::string>& texts, const char* op_name);

// Throws Error(kInvalidArgument) naming `op` and `name` unless `view` is a packed [rows, cols]
// matrix of `dtype`, not null, its address a multiple of `align`; a negative row count is refused
// first (a caller may pass the view's own rows as `rows`). With no rows a null view is fine
// whatever its other fields (nothing is read: a C caller leaves an absent tensor zeroed).
void check_collective_view(const char* op, const MatrixView& view, const char* name, DType dtype, std::int64_t rows,
                           std::int64_t cols, int align);

class PeerCollective {
 public:
  // Collective: compares setup.config_text between the ranks (the same Error(kInvalidArgument)
  // everywhere if they differ), agrees on the grid, then on the peer path maps the symmetric
  // buffers (kPeer where that fails: the same Error(kCommError) everywhere).
  PeerCollective(Runtime::Impl& runtime, Communicator::Impl& comm, const PeerCollectiveSetup& setup);

  CollectivePath path() const { return path_; }
  bool peer() const { return path_ == CollectivePath::kPeer; }
  int rank() const { return comm.rank; }
  int world() const { return comm.size; }
  // Blocks of a peer kernel: one per SM of the smallest GPU of the group (all resident at once,
  // which the all-blocks barriers need), at most kMaxPeerSlots.
  int grid() const { return grid_; }

  // Rank r's data part of the symmetric buffer as mapped here (peer path).
  void* data_on(int r) const;
  // The barrier state and status for a kernel call (the timeout is the communicator's now).
  kernels::PeerSync sync() const;
  // The status word's device address (on either path).
  kernels::PeerStatus* status() const { return status_.as<kernels::PeerStatus>(); }

  // check_collective_view under this op's name.
  void check_view(const MatrixView& view, const char* name, DType dtype, std::int64_t rows, std::int64_t cols,
                  int align) const;

  // Refuses a call once a peer wait has failed (the ranks' epochs no longer match).
  void check_usable(const char* what) const;
  // Waits for `stream` within the communicator's timeout, reads and clears the status; raises
  // Error(kCommError) after a timed-out wait (the communicator aborted when owned).
  kernels::PeerStatus check(CUstream stream, const char* what);

  Communicator::Impl& comm;
  const DeviceContext& device;
  SingleCaller calls;  // the op's run and check: one thread at a time

 private:
  const char* op_name_;
  CollectivePath path_ = CollectivePath::kNccl;
  int grid_ = 1;
  std::optional<SymmetricBuffer> symmetric_;
  std::size_t signals_offset_ = 0;  // of the signals in the symmetric buffer
  DeviceBuffer status_;
  bool broken_ = false;
};

// What the Impl of ReduceScatter and of MoeCombine share: the peer collective, the schedule and
// kernel that the op's agreed build step makes, and the rows the op moves (`hidden` elements of
// `dtype` each) with the vector width its kernels load them with.
struct PeerCollectiveOp : PlanActions {
  // `checked_setup` checks the op's config (throwing Error(kInvalidArgument) naming what is wrong)
  // and describes the op; it runs on every rank alike, so that a config one rank refuses makes
  // every rank throw the same error before any buffer exists. Then the peer collective is built
  // from the setup it returned.
  PeerCollectiveOp(Runtime::Impl& runtime, Communicator::Impl& comm, const char* op_name, std::int64_t hidden,
                   DType dtype, const std::function<PeerCollectiveSetup()>& checked_setup);

  PeerCollective peers;
  std::optional<Scheduler> scheduler;  // made in the op's agreed build step
  std::shared_ptr<const LoadedKernel> kernel;
  std::int64_t row_bytes = 0;
  int vec_bytes = 16;
};

}  // namespace shardjit
