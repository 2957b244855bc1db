// The tensor-parallel part of a LinearLogp op: built collectively (layouts exchanged and checked
// once, then every rank's build outcome agreed on), then each forward and backward runs its plan
// (runtime/ops/linear_logp/tp/plan.hpp) through the scheduler.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "runtime/comm/communicator_impl.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
#include "runtime/ops/linear_logp/tp/layout.hpp"
#include "runtime/ops/collective/peer_collective.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/scheduler.hpp"

namespace shardjit {

// Builds the op on this rank as one step of a collective build (every rank of `comm` calls it
// with its own config): exchanges and checks the layouts, builds locally, then exchanges whether
// that worked, so that every rank either gets its op or raises the same error.
std::unique_ptr<LinearLogp::Impl> build_tp_linear_logp(Runtime::Impl& runtime, const LinearLogpConfig& config,
                                                       Communicator::Impl& comm);

struct LinearLogpTp {
  LinearLogpTp(LinearLogp::Impl& op, Communicator::Impl& comm, TpLayout layout);

  // Collective, after every rank built its op: maps the ranks' symmetric buffers for the
  // forward's partials (config.max_rows rows) when 2 <= tp <= kMaxPeers and every rank can
  // reach every peer; forwards of up to that many rows then take the peer path.
  void attach_peer_path(LinearLogp::Impl& op);

  // Enqueues the TP forward of a checked call (n > 0) on `stream`.
  void forward(LinearLogp::Impl& op, const ForwardCall& call, CUstream stream);

  // Enqueues the TP backward plan: `launches` enqueues the backward's own kernels for the
  // plan's launch actions (kTpBackwardChunks, kTpBackwardLastWeight, kTpRoundGradHidden); the
  // all-reduce of `accumulator` (count fp32 values) is done here.
  void backward(PlanActions& launches, float* accumulator, std::int64_t count, CUstream stream);

  // Waits on the host for `stream`, within the communicator's timeout.
  void wait(CUstream stream, const char* what);

  // Before a buffer of the op grows: refuses during graph capture, then waits (bounded) until
  // neither `stream` nor the comm stream can still use the old buffers.
  void before_growth(CUstream stream, const char* what);

  // The bytes of the fp32 grad_hidden accumulator a TP backward of n_rows rows needs.
  std::int64_t accumulator_bytes(std::int64_t n_rows) const;

  Communicator::Impl& comm;
  TpLayout layout;
  std::int64_t row_bytes = 0;  // H x element size, for the split choice
  Scheduler forward_plan;
  std::optional<Scheduler> backward_plan;  // with config.want_backward
  DeviceBuffer gathered;                   // RowPartial [tp][splits][N]
  std::optional<PeerCollective> peers;     // the forward's peer path, when attached
  std::optional<Scheduler> peer_forward_plan;
  std::int64_t peer_rows = 0;              // the most rows a peer-path forward takes

 private:
  void ensure_gathered(std::int64_t partial_rows, CUstream stream);
  const DeviceContext& device_;
  std::int64_t hidden_ = 0;
};

}  // namespace shardjit
