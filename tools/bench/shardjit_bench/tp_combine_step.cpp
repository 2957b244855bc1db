#include "tp_combine_step.hpp"

#include <algorithm>
#include <vector>

#include "runtime/comm/communicator_impl.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/tp/plan.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/collective/peer_collective.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/scheduler.hpp"
#include "runtime/tooling.hpp"

namespace shardjit::bench {
namespace {

// The op's forward plan with its forward kernel left out.
class CombineOnly final : public PlanActions {
 public:
  CombineOnly(Communicator::Impl& comm, const LoadedKernel& combine, const kernels::LogpCombineArgs& args,
              kernels::RowPartial* mine, kernels::RowPartial* all, std::size_t bytes_per_rank)
      : comm_(comm), combine_(combine), args_(args), mine_(mine), all_(all), bytes_per_rank_(bytes_per_rank) {}

  void launch(int action, CUstream stream) override {
    if (action == kTpCombine) launch_logp_combine(combine_, args_, stream);
    if (action == kTpPeerCombine) launch_logp_combine_peers(combine_, args_, peer_blocks, stream);
  }
  int peer_blocks = 0;
  void collective(int, CUstream stream) override { comm_.all_gather(mine_, all_, bytes_per_rank_, stream); }

 private:
  Communicator::Impl& comm_;
  const LoadedKernel& combine_;
  kernels::LogpCombineArgs args_;
  kernels::RowPartial* mine_;
  kernels::RowPartial* all_;
  std::size_t bytes_per_rank_;
};

template <class T>
T* device_copy(const std::vector<T>& host) {
  void* device = nullptr;
  check_cuda(cudaMalloc(&device, host.size() * sizeof(T)), "cudaMalloc");
  check_cuda(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return static_cast<T*>(device);
}

}  // namespace

CombineStepTiming time_tp_combine_step(Runtime& runtime, Communicator& comm, std::int64_t n, std::int64_t hidden,
                                       std::int64_t vocab, DType dtype, cudaStream_t stream,
                                       const TimingOptions& timing) {
  Communicator::Impl& ci = comm.impl();
  const DeviceContext& device = tooling::device(runtime, comm.device());
  const int tp = comm.size();
  const int rank = comm.rank();

  // The split count the op picks for this N: the same agreed inputs it uses.
  TpLayout layout;
  layout.tp = tp;
  layout.rank = rank;
  layout.max_valid_local = (vocab + tp - 1) / tp;
  layout.gpu = GpuShape{device.info().sm_count, device.info().l2_bytes};
  layout.split_tile = default_fwd_tile(dtype, device.arch(), tooling::runtime_config(runtime).hopper_path);
  CombineStepTiming result;  // median_us stays the NCCL time where the peers are not reachable
  result.splits = tp_vocab_splits(layout, n, hidden * static_cast<std::int64_t>(dtype_size(dtype))).splits;
  const auto sources = static_cast<std::size_t>(tp * result.splits);
  const auto rows = static_cast<std::size_t>(n);

  const auto kernel = tooling::load_kernel(runtime, logp_combine_spec(DType::kInt64, false), comm.device());

  // Plausible partials (never zeros): a max of order one, sums of many exponentials.
  std::vector<kernels::RowPartial> partials(sources * rows);
  std::uint64_t state = 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(rank);
  auto unit = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<float>(state >> 40) / 16777216.0f;
  };
  for (auto& p : partials) {
    const float max = 2.0f * unit() - 1.0f;
    p = {max, 1000.0f + 1000.0f * unit(), 0.0f, max - unit()};
  }
  std::vector<std::int64_t> targets(rows);
  for (std::size_t i = 0; i < rows; ++i) targets[i] = static_cast<std::int64_t>((i * 7919) % static_cast<std::size_t>(vocab));
  kernels::RowPartial* all = device_copy(partials);
  std::int64_t* target_ids = device_copy(targets);
  float* out = device_copy(std::vector<float>(2 * rows, 0.0f));
  kernels::DeviceStatus* status = device_copy(std::vector<kernels::DeviceStatus>(1, kernels::DeviceStatus{}));

  kernels::LogpCombineArgs args{};
  args.sources = static_cast<int>(sources);
  args.partials = all;
  args.source_stride = n;
  args.targets = target_ids;
  args.logp = out;
  args.lse = out + rows;
  args.status = status;
  args.n_rows = n;
  args.valid_vocab = vocab;
  args.ignore_index = -100;
  kernels::RowPartial* mine = all + static_cast<std::size_t>(rank) * static_cast<std::size_t>(result.splits) * rows;
  const std::size_t bytes_per_rank = static_cast<std::size_t>(result.splits) * rows * sizeof(kernels::RowPartial);
  CombineOnly actions(ci, *kernel, args, mine, all, bytes_per_rank);
  const Scheduler scheduler(device, tp_forward_plan(), ci.stream.get());
  result.nccl_median_us = 1000.0 * median_ms([&] { scheduler.run(actions, stream); }, stream, timing);
  result.median_us = result.nccl_median_us;

  // The peer path: this rank's partials in its symmetric buffer, read there by every rank.
  PeerCollectiveSetup setup;
  setup.op_name = "combine step bench";
  setup.config_text = "rows=" + std::to_string(n);
  setup.data_bytes = bytes_per_rank;
  PeerCollective peers(runtime.impl(), ci, setup);
  if (peers.peer()) {
    check_cuda(cudaMemcpy(peers.data_on(rank), mine, bytes_per_rank, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    const auto peer_kernel = tooling::load_kernel(runtime, logp_combine_spec(DType::kInt64, false, tp), comm.device());
    kernels::LogpCombineArgs peer_args = args;
    for (int q = 0; q < tp; ++q) peer_args.rank_partials[q] = static_cast<kernels::RowPartial*>(peers.data_on(q));
    peer_args.sync = peers.sync();
    CombineOnly peer_actions(ci, *peer_kernel, peer_args, mine, all, bytes_per_rank);
    peer_actions.peer_blocks = logp_combine_peer_blocks(n, peer_args.sources, std::min(kernels::kMaxPeerSlots, 4 * peers.grid()));
    const Scheduler peer_scheduler(device, tp_forward_peer_plan(), ci.stream.get());
    result.median_us = 1000.0 * median_ms([&] { peer_scheduler.run(peer_actions, stream); }, stream, timing);
    peers.check(stream, "combine step bench");
  }

  for (void* p : std::initializer_list<void*>{all, target_ids, out, status}) cudaFree(p);
  return result;
}

}  // namespace shardjit::bench
