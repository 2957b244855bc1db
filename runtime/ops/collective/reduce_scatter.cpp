// Host side of ReduceScatter (templates/collective/reduce_scatter.cuh on the peer path,
// ncclReduceScatter on the NCCL path).
#include "shardjit/reduce_scatter.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "collective/reduce_scatter_args.cuh"
#include "runtime/comm/collective_build.hpp"
#include "runtime/comm/nccl_library.hpp"
#include "runtime/comm/peer_links.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/collective/kernels.hpp"
#include "runtime/ops/collective/peer_collective.hpp"
#include "runtime/ops/collective/peer_collective_plan.hpp"
#include "runtime/ops/view_checks.hpp"
#include "runtime/sched/launch.hpp"
#include "runtime/sched/scheduler.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// Inputs from this size on move in stages (sending overlaps summing); up to the second, in a
// flagged protocol (lines or words, no barrier round trips). See docs/perf-notes.md, "ReduceScatter design".
constexpr std::int64_t kStagedInputBytes = std::int64_t{64} << 20;
constexpr std::int64_t kFlaggedInputBytes = std::int64_t{4} << 20;

// Only when every block has rows: a rank waits for its peers only through the words of its own
// block, and a rank that waits for nobody could run calls ahead into a receive half that a peer
// has not read yet. (The barrier protocol publishes a flag per stage whatever the block holds.)
bool flagged(const ReduceScatterConfig& config) {
  const std::int64_t total = std::accumulate(config.rows_per_rank.begin(), config.rows_per_rank.end(), std::int64_t{0});
  const bool every_block_has_rows =
      std::all_of(config.rows_per_rank.begin(), config.rows_per_rank.end(), [](std::int64_t rows) { return rows > 0; });
  return every_block_has_rows &&
         total * config.hidden * static_cast<std::int64_t>(dtype_size(config.dtype)) <= kFlaggedInputBytes;
}

void check_config(const ReduceScatterConfig& config, int world) {
  const auto bad = [](const std::string& what) { throw Error(ErrorCode::kInvalidArgument, "ReduceScatter: " + what); };
  if (!dtype_is_float(config.dtype)) bad(std::string("dtype ") + dtype_name(config.dtype) + "; expected bf16, fp16 or fp32");
  if (config.hidden <= 0) bad("hidden = " + std::to_string(config.hidden) + "; expected > 0");
  if (config.rows_per_rank.size() != static_cast<std::size_t>(world)) {
    bad(std::to_string(config.rows_per_rank.size()) + " entries in rows_per_rank; expected one per rank (" +
        std::to_string(world) + ")");
  }
  for (std::int64_t rows : config.rows_per_rank) {
    if (rows < 0) bad("rows_per_rank has " + std::to_string(rows) + "; expected >= 0");
  }
  if (world > kernels::kMaxPeers) {
    bad(std::to_string(world) + " ranks; at most " + std::to_string(kernels::kMaxPeers) + " are supported");
  }
  collective_vector_bytes(config.hidden * static_cast<std::int64_t>(dtype_size(config.dtype)), "ReduceScatter");
}

std::string config_text(const ReduceScatterConfig& c) {
  std::string rows;
  for (std::int64_t r : c.rows_per_rank) rows += (rows.empty() ? "" : ",") + std::to_string(r);
  return std::string("dtype=") + dtype_name(c.dtype) + " hidden=" + std::to_string(c.hidden) + " rows_per_rank=[" +
         rows + "] path=" + collective_path_name(c.path) + " nccl_above_bytes=" + std::to_string(c.nccl_above_bytes);
}

// A receive area: two halves of one slot per other rank, each the largest block, or for a
// flagged call what the larger of the two flagged protocols needs for it (the protocol is agreed
// on only once the buffer is mapped).
std::int64_t receive_bytes(const ReduceScatterConfig& config, int world) {
  const std::int64_t largest = *std::max_element(config.rows_per_rank.begin(), config.rows_per_rank.end());
  const std::int64_t block_bytes = largest * config.hidden * static_cast<std::int64_t>(dtype_size(config.dtype));
  std::int64_t slot_bytes = block_bytes;
  if (flagged(config)) {
    const std::int64_t words_bytes = 2 * block_bytes;  // each 4-byte word in an 8-byte store
    const std::int64_t lines_bytes = kernels::flagged_lines(block_bytes / 4) * kernels::kLineBytes;
    slot_bytes = std::max(words_bytes, lines_bytes);
  }
  return 2 * (world - 1) * slot_bytes;
}

// The protocol of a call (templates/collective/reduce_scatter_args.cuh), the same on every rank.
// Collective on the peer path of a flagged config (the ranks agree on the links there), which
// every rank takes alike: the config and the path are agreed.
int protocol_of(const ReduceScatterConfig& config, PeerCollective& peers, const RuntimeConfig& runtime) {
  if (!flagged(config)) return kernels::kFlaggedStages;
  if (!peers.peer()) return kernels::kFlaggedWords;  // unused: the NCCL path launches no kernel
  return agreed_whole_line_links(peers.comm, runtime.peer_lines) ? kernels::kFlaggedLines : kernels::kFlaggedWords;
}

const char* protocol_name(int protocol) {
  switch (protocol) {
    case kernels::kFlaggedWords: return "flagged 8-byte words";
    case kernels::kFlaggedLines: return "flagged 128-byte lines";
    default: return "staged stores with release flags";
  }
}

// Checks the config (its own rules and the world size) and describes what the shared part needs.
PeerCollectiveSetup checked_setup(const ReduceScatterConfig& config, int world) {
  check_config(config, world);
  const std::int64_t total = std::accumulate(config.rows_per_rank.begin(), config.rows_per_rank.end(), std::int64_t{0});
  const std::int64_t row_bytes = config.hidden * static_cast<std::int64_t>(dtype_size(config.dtype));
  return {"ReduceScatter", config_text(config), config.path, static_cast<std::size_t>(total * row_bytes),
          config.nccl_above_bytes, static_cast<std::size_t>(receive_bytes(config, world))};
}

}  // namespace

struct ReduceScatter::Impl final : PeerCollectiveOp {
  Impl(Runtime::Impl& runtime, Communicator::Impl& comm, const ReduceScatterConfig& c)
      : PeerCollectiveOp(runtime, comm, "ReduceScatter", c.hidden, c.dtype, [&] { return checked_setup(c, comm.size); }),
        config(c) {
    const std::int64_t chunks_per_row = row_bytes / vec_bytes;
    std::int64_t offset = 0;
    for (std::size_t r = 0; r < config.rows_per_rank.size(); ++r) {
      args.chunk_offset[r] = offset * chunks_per_row;
      nccl_counts.push_back(static_cast<std::size_t>(config.rows_per_rank[r] * config.hidden));
      offset += config.rows_per_rank[r];
    }
    args.chunk_offset[config.rows_per_rank.size()] = offset * chunks_per_row;
    total_rows = offset;
    // Stages pay off once a block's slice is large; below, each stage would only add an NVLink
    // round trip (docs/perf-notes.md, "ReduceScatter design").
    args.stages = total_rows * row_bytes >= kStagedInputBytes ? kernels::kReduceScatterStages : 1;
    args.protocol = protocol_of(config, peers, runtime.config);
    if (peers.peer() && peers.rank() == 0) log().info("ReduceScatter: {} protocol", protocol_name(args.protocol));
    args.slot_chunks = *std::max_element(config.rows_per_rank.begin(), config.rows_per_rank.end()) * chunks_per_row;
    // Every local step that can fail on one rank only is agreed on: the symmetric buffer's release
    // is itself collective, so a rank must not drop out of the build alone.
    run_on_every_rank(comm, "ReduceScatter build", [&] {
      scheduler.emplace(peers.device, reduce_scatter_plan(peers.peer()), comm.stream.get());
      if (!peers.peer()) return;
      kernel = runtime.prepare({reduce_scatter_spec(config.dtype, comm.size, vec_bytes)}, comm.device.info().ordinal,
                               "ReduceScatter",
                               collective_prewarm_command(config.dtype, comm.size, config.hidden, comm.device.arch()))
                   .front();
    });
  }

  void enqueue(const MatrixView& input, const MatrixView& output, CUstream stream) {
    peers.check_usable("run");
    peers.check_view(input, "input", config.dtype, total_rows, config.hidden, vec_bytes);
    peers.check_view(output, "output", config.dtype, config.rows_per_rank[static_cast<std::size_t>(peers.rank())],
                     config.hidden, vec_bytes);
    check_no_overlap({span_of("ReduceScatter: output", output)}, {span_of("input", input)});
    ScopedContext scope(peers.device);
    input_ = input.data;
    output_ = output.data;
    scheduler->run(*this, stream);
  }

  void launch(int action, CUstream stream) override {
    if (action != kPeerKernel) throw Error(ErrorCode::kInternal, "ReduceScatter: unknown launch " + std::to_string(action));
    for (int r = 0; r < peers.world(); ++r) args.receive[r] = peers.data_on(r);
    args.input = input_;
    args.output = output_;
    args.sync = peers.sync();
    LaunchShape shape;
    // A block owns kReduceScatterStages barrier slots.
    shape.grid_x = static_cast<unsigned>(std::min(peers.grid(), kernels::kMaxPeerSlots / kernels::kReduceScatterStages));
    shape.block_x = kernels::kPeerThreads;
    // The kernel waits for the stream's previous kernel before it touches memory, so the next
    // call's launch overlaps this one's end (docs/perf-notes.md, "ReduceScatter design").
    shape.early_start = peers.device.info().cc_major >= 9;
    shardjit::launch(*kernel, shape, args, stream);
  }

  void collective(int action, CUstream stream) override {
    if (action != kNcclReduceScatter) {
      throw Error(ErrorCode::kInternal, "ReduceScatter: unknown collective " + std::to_string(action));
    }
    peers.comm.reduce_scatter_sum(input_, output_, nccl_counts, nccl_type_of(config.dtype), stream);
  }

  ReduceScatterConfig config;
  std::int64_t total_rows = 0;
  std::vector<std::size_t> nccl_counts;
  kernels::ReduceScatterArgs args{};

 private:
  const void* input_ = nullptr;
  void* output_ = nullptr;
};

ReduceScatter::ReduceScatter(Runtime& runtime, Communicator& comm, const ReduceScatterConfig& config)
    : impl_(std::make_unique<Impl>(runtime.impl(), comm.impl(), config)) {}

ReduceScatter::~ReduceScatter() = default;

void ReduceScatter::run(const MatrixView& input, const MatrixView& output, StreamHandle stream) {
  const SingleCaller::Scope one_caller(impl_->peers.calls, "ReduceScatter::run");
  impl_->enqueue(input, output, static_cast<CUstream>(stream));
}

CollectivePath ReduceScatter::path() const { return impl_->peers.path(); }

int ReduceScatter::device() const { return impl_->peers.device.info().ordinal; }

void ReduceScatter::check(StreamHandle stream) {
  const SingleCaller::Scope one_caller(impl_->peers.calls, "ReduceScatter::check");
  impl_->peers.check(static_cast<CUstream>(stream), "ReduceScatter::check");
}

const ReduceScatterConfig& ReduceScatter::config() const { return impl_->config; }

}  // namespace shardjit
