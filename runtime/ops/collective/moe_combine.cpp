// Host side of MoeCombine (templates/collective/moe_combine.cuh on both paths: over peer memory,
// or over the buffers an NCCL all-gather brought here).
#include "shardjit/moe_combine.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "collective/moe_combine_args.cuh"
#include "runtime/comm/collective_build.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/ops/collective/kernels.hpp"
#include "runtime/ops/collective/peer_collective.hpp"
#include "runtime/ops/collective/peer_collective_plan.hpp"
#include "runtime/ops/view_checks.hpp"
#include "runtime/sched/launch.hpp"
#include "runtime/sched/scheduler.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void check_config(const MoeCombineConfig& config, int world) {
  const auto bad = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "MoeCombine: " + what); };
  if (!dtype_is_float(config.dtype)) bad(std::string("dtype ") + dtype_name(config.dtype) + "; expected bf16, fp16 or fp32");
  if (config.hidden <= 0 || config.hidden > 65536) {
    bad("hidden = " + std::to_string(config.hidden) + "; expected 1 to 65536");
  }
  if (config.capacity < 0 || config.capacity > 2147483647) {
    bad("capacity = " + std::to_string(config.capacity) + "; expected 0 to 2^31 - 1 rows");
  }
  if (world > kernels::kMaxPeers) {
    bad(std::to_string(world) + " ranks; at most " + std::to_string(kernels::kMaxPeers) + " are supported");
  }
  collective_vector_bytes(config.hidden * static_cast<std::int64_t>(dtype_size(config.dtype)), "MoeCombine");
}

std::string config_text(const MoeCombineConfig& c) {
  return std::string("dtype=") + dtype_name(c.dtype) + " hidden=" + std::to_string(c.hidden) +
         " capacity=" + std::to_string(c.capacity) + " gates=" + (c.gates ? "yes" : "no") +
         " path=" + collective_path_name(c.path) + " nccl_above_bytes=" + std::to_string(c.nccl_above_bytes);
}

// Checks the config (its own rules and the world size) and describes what the shared part needs.
PeerCollectiveSetup checked_setup(const MoeCombineConfig& config, int world) {
  check_config(config, world);
  const std::size_t data_bytes = static_cast<std::size_t>(config.capacity * config.hidden) * dtype_size(config.dtype);
  return {"MoeCombine", config_text(config), config.path, data_bytes, config.nccl_above_bytes, data_bytes};
}

}  // namespace

struct MoeCombine::Impl final : PeerCollectiveOp {
  Impl(Runtime::Impl& runtime, Communicator::Impl& comm, const MoeCombineConfig& c)
      : PeerCollectiveOp(runtime, comm, "MoeCombine", c.hidden, c.dtype, [&] { return checked_setup(c, comm.size); }),
        config(c) {
    slot_bytes = static_cast<std::size_t>(config.capacity * row_bytes);
    // Every local step that can fail on one rank only is agreed on: the symmetric buffer's release
    // is itself collective, so a rank must not drop out of the build alone.
    run_on_every_rank(comm, "MoeCombine build", [&] {
      scheduler.emplace(peers.device, moe_combine_plan(peers.peer()), comm.stream.get());
      kernel = runtime.prepare({moe_combine_spec(config.dtype, comm.size, config.hidden, vec_bytes, config.gates)},
                               comm.device.info().ordinal, "MoeCombine",
                               collective_prewarm_command(config.dtype, comm.size, config.hidden, comm.device.arch()))
                   .front();
      if (!peers.peer()) {
        ScopedContext scope(peers.device);
        gathered = DeviceBuffer(peers.device, std::max<std::size_t>(slot_bytes * static_cast<std::size_t>(comm.size), 1));
      }
    });
  }

  void* own_slot() const {
    return peers.peer() ? peers.data_on(peers.rank())
                        : static_cast<void*>(gathered.as<char>() + slot_bytes * static_cast<std::size_t>(peers.rank()));
  }

  // This rank's slot as rows [capacity, H]: what rows_buffer() hands out and the peers read.
  MatrixView own_rows() const { return MatrixView{own_slot(), config.dtype, config.capacity, config.hidden, config.hidden}; }

  void enqueue(const MoeCombineCall& call, CUstream stream) {
    peers.check_usable("run");
    const bool zero_copy = call.rows.data == nullptr;
    const std::int64_t rows = call.rows.rows;
    if (rows < 0 || rows > config.capacity) {
      throw Error(ErrorCode::kInvalidArgument, "MoeCombine: rows has " + std::to_string(rows) +
                                                   " rows; expected 0 to capacity (" + std::to_string(config.capacity) + ")");
    }
    if (!zero_copy) peers.check_view(call.rows, "rows", config.dtype, rows, config.hidden, vec_bytes);
    const std::int64_t tokens = call.output.rows;
    peers.check_view(call.output, "output", config.dtype, tokens, config.hidden, vec_bytes);
    peers.check_view(call.positions, "positions", DType::kInt32, tokens, peers.world(), 4);
    if (config.gates) {
      peers.check_view(call.gates, "gates", DType::kFP32, tokens, peers.world(), 4);
    } else if (call.gates.data != nullptr) {
      throw Error(ErrorCode::kInvalidArgument, "MoeCombine: gates given, but the op was built without (config.gates)");
    }
    // The own rows buffer is what the peers read, whether the rows were written there or are
    // copied there.
    check_no_overlap({span_of("MoeCombine: output", call.output)},
                     {span_of("rows", call.rows), span_of("the op's rows buffer", own_rows()),
                      span_of("positions", call.positions), span_of("gates", call.gates)});
    ScopedContext scope(peers.device);
    zero_copy_ = zero_copy;
    args = kernels::MoeCombineArgs{};
    args.rows = zero_copy ? own_slot() : call.rows.data;
    args.n_source_rows = rows;
    args.capacity = config.capacity;
    args.positions = static_cast<const int*>(call.positions.data);
    args.gates = static_cast<const float*>(call.gates.data);
    args.output = call.output.data;
    args.n_tokens = tokens;
    args.sync = peers.sync();
    scheduler->run(*this, stream);
  }

  void launch(int action, CUstream stream) override {
    if (action == kStageRows) {
      if (!zero_copy_ && args.n_source_rows > 0) {
        SHARDJIT_CU(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(own_slot()), reinterpret_cast<CUdeviceptr>(args.rows),
                                      static_cast<std::size_t>(args.n_source_rows * row_bytes), stream));
      }
      return;
    }
    if (action != kPeerKernel && action != kLocalCombine) {
      throw Error(ErrorCode::kInternal, "MoeCombine: unknown launch " + std::to_string(action));
    }
    for (int s = 0; s < peers.world(); ++s) {
      if (action == kLocalCombine) {
        args.sources[s] = gathered.as<char>() + slot_bytes * static_cast<std::size_t>(s);
      } else {
        args.sources[s] = s == peers.rank() ? args.rows : peers.data_on(s);
      }
    }
    args.symmetric = action == kPeerKernel && !zero_copy_ ? peers.data_on(peers.rank()) : nullptr;
    LaunchShape shape;
    shape.block_x = kernels::kPeerThreads;
    // The peer kernel's blocks meet the peers' in barriers: the agreed grid, even for no tokens.
    shape.grid_x = static_cast<unsigned>(peers.grid());
    if (action == kLocalCombine) {
      if (args.n_tokens == 0) return;
      shape.grid_x = static_cast<unsigned>(std::min<std::int64_t>(args.n_tokens, 4 * peers.grid()));
    }
    shardjit::launch(*kernel, shape, args, stream);
  }

  void collective(int action, CUstream stream) override {
    if (action != kNcclAllGatherRows) {
      throw Error(ErrorCode::kInternal, "MoeCombine: unknown collective " + std::to_string(action));
    }
    if (slot_bytes == 0) return;
    peers.comm.all_gather(own_slot(), gathered.as<void>(), slot_bytes, stream);
  }

  MoeCombineConfig config;
  std::size_t slot_bytes = 0;
  DeviceBuffer gathered;  // NCCL path: [world][capacity][H]
  kernels::MoeCombineArgs args{};

 private:
  bool zero_copy_ = false;
};

MoeCombine::MoeCombine(Runtime& runtime, Communicator& comm, const MoeCombineConfig& config)
    : impl_(std::make_unique<Impl>(runtime.impl(), comm.impl(), config)) {}

MoeCombine::~MoeCombine() = default;

void MoeCombine::run(const MoeCombineCall& call, StreamHandle stream) {
  const SingleCaller::Scope one_caller(impl_->peers.calls, "MoeCombine::run");
  impl_->enqueue(call, static_cast<CUstream>(stream));
}

MatrixView MoeCombine::rows_buffer() { return impl_->own_rows(); }

CollectivePath MoeCombine::path() const { return impl_->peers.path(); }

int MoeCombine::device() const { return impl_->peers.device.info().ordinal; }

BadPositionReport MoeCombine::check(StreamHandle stream) {
  const SingleCaller::Scope one_caller(impl_->peers.calls, "MoeCombine::check");
  const kernels::PeerStatus status = impl_->peers.check(static_cast<CUstream>(stream), "MoeCombine::check");
  return BadPositionReport{status.bad_positions, status.first_bad_position};
}

const MoeCombineConfig& MoeCombine::config() const { return impl_->config; }

}  // namespace shardjit
