#include "runtime/ops/linear_logp/tp/tp.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runtime/comm/collective_build.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/ops/linear_logp/tp/plan.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// This rank's record: its config (resolved where it can be), its GPU and forward tile, or why
// it cannot build the op. Never throws for a bad config: the error travels in the record, so
// that the other ranks learn of it instead of waiting.
TpLayoutRecord local_record(Runtime::Impl& runtime, const LinearLogpConfig& config, const Communicator::Impl& comm) {
  TpLayoutRecord record = make_tp_layout_record(config, comm.rank, comm.size);
  try {
    const LinearLogpLayout layout = resolve_layout(config);
    record = make_tp_layout_record(layout.config, comm.rank, comm.size);
    const int comm_device = comm.device.info().ordinal;
    if (layout.config.device != comm_device) {
      throw Error(ErrorCode::kInvalidArgument, "config.device = " + std::to_string(layout.config.device) +
                                                   ", but the communicator runs on device " +
                                                   std::to_string(comm_device));
    }
    const DeviceContext& device = runtime.device(layout.config.device);
    const FwdTile tile = default_fwd_tile(layout.config.dtype, device.arch(), runtime.config.hopper_path);
    record.sm_count = device.info().sm_count;
    record.l2_bytes = device.info().l2_bytes;
    record.tile_bm = tile.bm;
    record.tile_bn = tile.bn;
  } catch (const std::exception& e) {
    set_tp_layout_error(record, e.what());
  }
  return record;
}

// The forward's work steps for one call: NCCL path (partials gathered into `all`) or peer path
// (`peers`: partials stay in each rank's symmetric buffer).
class ForwardActions final : public PlanActions {
 public:
  ForwardActions(LinearLogp::Impl& op, Communicator::Impl& comm, const ForwardCall& call, const VocabSplit& plan,
                 int tp, kernels::RowPartial* all, int rank, const PeerCollective* peers)
      : op_(op),
        comm_(comm),
        plan_(plan),
        mine_(peers != nullptr ? static_cast<kernels::RowPartial*>(peers->data_on(rank))
                               : all + static_cast<std::int64_t>(rank) * plan.sources() * call.n),
        all_(all),
        bytes_per_rank_(static_cast<std::size_t>(plan.sources() * call.n) * sizeof(kernels::RowPartial)),
        fwd_(op.fwd_args(call, mine_, plan)),
        combine_(op.combine_args(call, all, tp * plan.sources())) {
    if (peers == nullptr) return;
    for (int q = 0; q < peers->world(); ++q) combine_.rank_partials[q] = static_cast<kernels::RowPartial*>(peers->data_on(q));
    combine_.sync = peers->sync();
    peer_blocks_ = logp_combine_peer_blocks(call.n, combine_.sources, std::min(kernels::kMaxPeerSlots, 4 * peers->grid()));
  }

  void launch(int action, CUstream stream) override {
    if (action == kTpForwardKernel) {
      launch_linear_logp_fwd(*op_.fwd, fwd_, plan_, op_.layout, op_.tile, stream);
    } else if (action == kTpCombine) {
      launch_logp_combine(*op_.combine, combine_, stream);
    } else if (action == kTpPeerCombine) {
      launch_logp_combine_peers(op_.peer_combine_kernel(), combine_, peer_blocks_, stream);
    } else {
      throw Error(ErrorCode::kInternal, "TP forward: unknown launch action " + std::to_string(action));
    }
  }

  void collective(int action, CUstream stream) override {
    if (action != kTpAllGatherPartials) {
      throw Error(ErrorCode::kInternal, "TP forward: unknown collective action " + std::to_string(action));
    }
    comm_.all_gather(mine_, all_, bytes_per_rank_, stream);
  }

 private:
  LinearLogp::Impl& op_;
  Communicator::Impl& comm_;
  VocabSplit plan_;
  kernels::RowPartial* mine_;
  kernels::RowPartial* all_;
  std::size_t bytes_per_rank_;
  kernels::LinearLogpFwdArgs fwd_;
  kernels::LogpCombineArgs combine_;
  int peer_blocks_ = 0;
};

// The backward's launches come from the caller; the all-reduce is ours.
class BackwardActions final : public PlanActions {
 public:
  BackwardActions(PlanActions& launches, Communicator::Impl& comm, float* accumulator, std::int64_t count)
      : launches_(launches), comm_(comm), accumulator_(accumulator), count_(count) {}

  void launch(int action, CUstream stream) override { launches_.launch(action, stream); }

  void collective(int action, CUstream stream) override {
    if (action != kTpAllReduceGradHidden) {
      throw Error(ErrorCode::kInternal, "TP backward: unknown collective action " + std::to_string(action));
    }
    comm_.all_reduce_sum(accumulator_, static_cast<std::size_t>(count_), ncclFloat32, stream);
  }

 private:
  PlanActions& launches_;
  Communicator::Impl& comm_;
  float* accumulator_;
  std::int64_t count_;
};

}  // namespace

std::unique_ptr<LinearLogp::Impl> build_tp_linear_logp(Runtime::Impl& runtime, const LinearLogpConfig& config,
                                                       Communicator::Impl& comm) {
  comm.check_usable("LinearLogp (tensor parallel)");
  // 1. Layouts: exchanged and checked alike on every rank (the same error everywhere).
  const std::vector<TpLayoutRecord> records = exchange_records(comm, local_record(runtime, config, comm), "LinearLogp layout exchange");
  TpLayout layout = check_tp_layout(records, comm.rank);

  // 2. The local build (kernels, buffers, events); 3. agreement on how it went.
  std::unique_ptr<LinearLogp::Impl> op;
  run_on_every_rank(comm, "LinearLogp tensor-parallel build", [&] {
    // The default tile, as local_record told the other ranks (tuning records are per process).
    const FwdTile tile = default_fwd_tile(config.dtype, runtime.device(config.device).arch(), runtime.config.hopper_path);
    op = std::make_unique<LinearLogp::Impl>(runtime, config, layout.tp, tile);
    op->tp = std::make_unique<LinearLogpTp>(*op, comm, std::move(layout));
  });
  // 4. The forward's peer path, collectively (every rank has its op now).
  op->tp->attach_peer_path(*op);
  return op;
}

LinearLogpTp::LinearLogpTp(LinearLogp::Impl& op, Communicator::Impl& communicator, TpLayout agreed)
    : comm(communicator),
      layout(std::move(agreed)),
      row_bytes(op.layout.config.hidden * static_cast<std::int64_t>(dtype_size(op.layout.config.dtype))),
      forward_plan(op.device, tp_forward_plan(), communicator.stream.get()),
      device_(op.device),
      hidden_(op.layout.config.hidden) {
  const LinearLogpConfig& c = op.layout.config;
  if (c.want_backward) backward_plan.emplace(op.device, tp_backward_plan(), comm.stream.get());
  if (c.max_rows > 0) {
    ScopedContext scope(device_);
    ensure_gathered(tp_partial_rows(layout, c.max_rows, row_bytes), nullptr);
    if (c.want_backward) {
      BackwardChunks plan = op.bwd.reserve_chunks(c.max_rows);
      plan.accumulator_bytes = static_cast<std::size_t>(accumulator_bytes(c.max_rows));
      op.bwd.reserve(plan, nullptr);
    }
    SHARDJIT_CU(cuStreamSynchronize(nullptr));
  }
}

std::int64_t LinearLogpTp::accumulator_bytes(std::int64_t n_rows) const {
  return n_rows * hidden_ * static_cast<std::int64_t>(sizeof(float));
}

void LinearLogpTp::ensure_gathered(std::int64_t partial_rows, CUstream stream) {
  const std::size_t bytes = static_cast<std::size_t>(partial_rows) * sizeof(kernels::RowPartial);
  if (bytes <= gathered.bytes()) return;
  // The old buffer may still be read on the comm stream too, which grow_buffer_for_stream does
  // not know of; a first growth has nothing to wait for.
  if (gathered.bytes() > 0) before_growth(stream, "partials buffer");
  grow_buffer_for_stream(gathered, bytes, device_, stream, "LinearLogp (tensor parallel): the partials buffer");
}

void LinearLogpTp::attach_peer_path(LinearLogp::Impl& op) {
  if (layout.tp < 2 || layout.tp > kernels::kMaxPeers) return;  // agreed: the same on every rank
  // max_rows is not part of the layout check: take the smallest of every rank's, so that every
  // rank makes the same decision (and the same collective calls) below.
  std::int64_t max_rows = op.layout.config.max_rows;
  for (const std::string& text : exchange_text(comm, std::to_string(max_rows), 32, "LinearLogp max_rows exchange")) {
    max_rows = std::min<std::int64_t>(max_rows, std::stoll(text));
  }
  if (max_rows <= 0) return;
  PeerCollectiveSetup setup;
  setup.op_name = "LinearLogp (tensor parallel)";
  setup.config_text = "max_rows=" + std::to_string(max_rows);
  setup.data_bytes = static_cast<std::size_t>(tp_partial_rows(layout, max_rows, row_bytes) / layout.tp) *
                     sizeof(kernels::RowPartial);
  peers.emplace(op.runtime, comm, setup);
  if (!peers->peer()) {
    peers.reset();
    return;
  }
  peer_forward_plan.emplace(op.device, tp_forward_peer_plan(), comm.stream.get());
  peer_rows = max_rows;
}

void LinearLogpTp::forward(LinearLogp::Impl& op, const ForwardCall& call, CUstream stream) {
  comm.check_usable("LinearLogp::forward");
  const VocabSplit plan = tp_vocab_splits(layout, call.n, row_bytes);
  if (peers && call.n <= peer_rows) {
    peers->check_usable("forward");
    ForwardActions actions(op, comm, call, plan, layout.tp, nullptr, layout.rank, &*peers);
    peer_forward_plan->run(actions, stream);
    return;
  }
  if (static_cast<std::size_t>(layout.tp) * plan.sources() * call.n * sizeof(kernels::RowPartial) > gathered.bytes()) {
    ensure_gathered(tp_partial_rows(layout, call.n, row_bytes), stream);  // to the peak of any call up to N rows
  }
  ForwardActions actions(op, comm, call, plan, layout.tp, gathered.as<kernels::RowPartial>(), layout.rank, nullptr);
  forward_plan.run(actions, stream);
}

void LinearLogpTp::backward(PlanActions& launches, float* accumulator, std::int64_t count, CUstream stream) {
  comm.check_usable("LinearLogp::backward");
  if (!backward_plan) throw Error(ErrorCode::kInternal, "TP backward plan missing");
  BackwardActions actions(launches, comm, accumulator, count);
  backward_plan->run(actions, stream);
}

void LinearLogpTp::wait(CUstream stream, const char* what) {
  // With the peer path, also raises if a combine gave up waiting for a peer.
  if (peers) {
    peers->check(stream, what);
  } else {
    comm.wait_stream(stream, what);
  }
}

void LinearLogpTp::before_growth(CUstream stream, const char* what) {
  check_growth_outside_capture(stream, std::string("LinearLogp (tensor parallel): the ") + what);
  // Earlier calls may still use the old buffers, on the caller's stream or the comm stream.
  wait(stream, what);
  wait(comm.stream.get(), what);
}

}  // namespace shardjit
