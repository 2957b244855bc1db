#include "reduce_scatter_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_data.hpp"
#include "rank_processes.hpp"
#include "runtime/tooling.hpp"
#include "shardjit/shardjit.hpp"

namespace shardjit::bench {
namespace {

// Calls captured in one CUDA graph for the graph timings (host launch work out of the loop).
constexpr int kCallsPerGraph = 8;
// Calls enqueued back to back between two events for the burst timings.
constexpr int kCallsPerBurst = 32;

// The baseline communicator: a blocking NCCL communicator over the same ranks (what frameworks
// use), made from a unique id sent over the op's communicator. The op's own communicator is
// non-blocking (so that a dead peer cannot hang it), which costs host time on every collective
// (NCCL launches them from a thread of its own and returns ncclInProgress); both are reported.
class BlockingNccl {
 public:
  explicit BlockingNccl(Communicator& comm) : api_(nccl()) {
    ncclUniqueId id{};
    if (comm.rank() == 0 && api_.ncclGetUniqueId(&id) != ncclSuccess) throw std::runtime_error("ncclGetUniqueId failed");
    const std::vector<std::byte> ids = tooling::exchange(comm, &id, sizeof(id), "baseline communicator id");
    std::memcpy(&id, ids.data(), sizeof(id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    if (api_.ncclCommInitRankConfig(&comm_, comm.size(), id, comm.rank(), &config) != ncclSuccess) {
      throw std::runtime_error("ncclCommInitRankConfig (blocking baseline) failed");
    }
  }
  ~BlockingNccl() { api_.ncclCommDestroy(comm_); }
  BlockingNccl(const BlockingNccl&) = delete;
  BlockingNccl& operator=(const BlockingNccl&) = delete;

  void reduce_scatter(const void* in, void* out, std::size_t count, DType dtype, cudaStream_t stream) {
    if (api_.ncclReduceScatter(in, out, count, nccl_type_of(dtype), ncclSum, comm_, stream) != ncclSuccess) {
      throw std::runtime_error("ncclReduceScatter failed");
    }
  }

 private:
  const NcclApi& api_;
  ncclComm_t comm_ = nullptr;
};

ReduceScatterConfig config_of(const ReduceScatterCase& c, int ranks, CollectivePath path) {
  ReduceScatterConfig config;
  config.dtype = c.dtype;
  config.hidden = c.hidden;
  config.rows_per_rank.assign(static_cast<std::size_t>(ranks), c.tokens / ranks);
  config.path = path;
  return config;
}

void run_case(Runtime& runtime, Communicator& comm, BlockingNccl& baseline, const ReduceScatterCase& c,
              cudaStream_t stream, const TimingOptions& timing) {
  const int ranks = comm.size();
  const std::int64_t rows = c.tokens / ranks;
  const std::int64_t total = rows * ranks;
  const std::size_t in_count = static_cast<std::size_t>(total * c.hidden);
  const std::size_t out_count = static_cast<std::size_t>(rows * c.hidden);
  RotatingInputs inputs({{in_count, 1.0f, 100 + 10 * static_cast<std::uint64_t>(comm.rank())}}, c.dtype);
  void* output = nullptr;
  check_cuda(cudaMalloc(&output, out_count * dtype_size(c.dtype)), "cudaMalloc");
  const MatrixView out{output, c.dtype, rows, c.hidden, 0};
  const auto in = [&] { return MatrixView{inputs.next()[0], c.dtype, total, c.hidden, 0}; };

  const auto nccl_call = [&] { baseline.reduce_scatter(inputs.next()[0], output, out_count, c.dtype, stream); };
  const double nccl_ms = median_ms(nccl_call, stream, timing);
  const double nccl_graph_ms = graph_median_ms(nccl_call, kCallsPerGraph, stream, timing);
  const BurstTiming nccl_burst = burst_median(nccl_call, kCallsPerBurst, stream, timing);
  // ncclReduceScatter on the op's non-blocking communicator, through its checked call (which
  // waits out the ncclInProgress before the next call).
  const std::vector<std::size_t> counts(static_cast<std::size_t>(ranks), out_count);
  const double nccl_nonblocking_ms = median_ms(
      [&] { tooling::nccl_reduce_scatter_sum(comm, inputs.next()[0], output, counts, c.dtype, stream); }, stream,
      timing);

  double peer_ms = 0, peer_graph_ms = 0, nccl_op_ms = 0;
  BurstTiming peer_burst;
  std::string path;
  {
    ReduceScatter op(runtime, comm, config_of(c, ranks, CollectivePath::kAuto));
    path = collective_path_name(op.path());
    peer_ms = median_ms([&] { op.run(in(), out, stream); }, stream, timing);
    peer_graph_ms = graph_median_ms([&] { op.run(in(), out, stream); }, kCallsPerGraph, stream, timing);
    peer_burst = burst_median([&] { op.run(in(), out, stream); }, kCallsPerBurst, stream, timing);
    op.check(stream);
  }
  {
    ReduceScatter op(runtime, comm, config_of(c, ranks, CollectivePath::kNccl));
    nccl_op_ms = median_ms([&] { op.run(in(), out, stream); }, stream, timing);
    op.check(stream);
  }
  cudaFree(output);

  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, comm.device()), "cudaGetDeviceProperties");
  const double in_bytes = static_cast<double>(in_count * dtype_size(c.dtype));
  nlohmann::json row = {{"bench", "reduce-scatter"},
                        {"case", c.name},
                        {"ranks", ranks},
                        {"rank", comm.rank()},
                        {"tokens", total},
                        {"hidden", c.hidden},
                        {"dtype", dtype_name(c.dtype)},
                        {"auto_path", path},
                        {"nccl_us", nccl_ms * 1000},
                        {"nccl_nonblocking_us", nccl_nonblocking_ms * 1000},
                        {"peer_us", peer_ms * 1000},
                        {"nccl_path_us", nccl_op_ms * 1000},
                        {"throughput_vs_nccl", nccl_ms / peer_ms},
                        // The latency: GPU time per call replayed from graphs, as a small op
                        // should be timed (launch gaps out) and as servers run decode steps.
                        {"latency_vs_nccl", peer_graph_ms / nccl_graph_ms},
                        // With an event recorded after every call, which adds its own gap
                        // (~3.5 µs on H200) to both sides.
                        {"latency_vs_nccl_per_call", peer_ms / nccl_ms},
                        {"calls_per_graph", kCallsPerGraph},
                        {"nccl_graph_us", nccl_graph_ms * 1000},
                        {"peer_graph_us", peer_graph_ms * 1000},
                        {"calls_per_burst", kCallsPerBurst},
                        {"nccl_burst_us", nccl_burst.gpu_ms_per_call * 1000},
                        {"peer_burst_us", peer_burst.gpu_ms_per_call * 1000},
                        {"nccl_host_us", nccl_burst.host_ms_per_call * 1000},
                        {"peer_host_us", peer_burst.host_ms_per_call * 1000},
                        {"latency_vs_nccl_burst", peer_burst.gpu_ms_per_call / nccl_burst.gpu_ms_per_call},
                        {"input_GBps_peer", in_bytes / (peer_ms * 1e6)},
                        {"input_GBps_nccl", in_bytes / (nccl_ms * 1e6)},
                        {"device", prop.name},
                        {"date", today()}};
  std::printf("%s\n", row.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

std::vector<ReduceScatterCase> load_reduce_scatter_cases(const std::string& shapes_path) {
  std::ifstream in(shapes_path);
  if (!in) throw std::runtime_error("cannot open shapes file '" + shapes_path + "'");
  const nlohmann::json shapes = nlohmann::json::parse(in);
  std::vector<ReduceScatterCase> cases;
  for (const auto& c : shapes.at("reduce_scatter").at("cases")) {
    auto dtype = parse_dtype(c.at("dtype").get<std::string>());
    if (!dtype) throw std::runtime_error("unknown dtype in " + shapes_path);
    cases.push_back({c.at("name"), c.at("tokens"), c.at("hidden"), *dtype});
  }
  return cases;
}

int run_reduce_scatter_cases(const std::vector<ReduceScatterCase>& cases, int ranks, const TimingOptions& timing) {
  return run_rank_processes(ranks, [&](int rank, const CommUniqueId& id) {
    check_cuda(cudaSetDevice(rank), "cudaSetDevice");
    cudaStream_t stream;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    Runtime runtime;
    CommOptions options;
    options.timeout = std::chrono::minutes(10);  // a first-time compile on one rank keeps the other waiting
    Communicator comm = Communicator::create(runtime, rank, rank, ranks, id, options);
    BlockingNccl baseline(comm);
    for (const ReduceScatterCase& c : cases) run_case(runtime, comm, baseline, c, stream, timing);
    cudaStreamDestroy(stream);
  });
}

}  // namespace shardjit::bench
