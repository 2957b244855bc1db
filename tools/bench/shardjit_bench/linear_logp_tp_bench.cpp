#include "linear_logp_tp_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "rank_processes.hpp"
#include "device_data.hpp"
#include "shardjit/shardjit.hpp"
#include "tp_combine_step.hpp"

namespace shardjit::bench {
namespace {


// The case's inputs on this GPU: X [n, H], W rows [start, start + rows), targets over the
// whole vocabulary, outputs.
struct Buffers {
  Buffers(const LinearLogpCase& c, std::int64_t start, std::int64_t rows) {
    x = random_device(static_cast<std::size_t>(c.n * c.hidden), c.dtype, 1.0f, 1);
    // Seeded by the first row, so that ranks hold different weights (like a real shard).
    w = random_device(static_cast<std::size_t>(rows * c.hidden), c.dtype,
                      4.0f / std::sqrt(static_cast<float>(c.hidden)), 2 + static_cast<std::uint64_t>(start));
    std::vector<std::int64_t> host(static_cast<std::size_t>(c.n));
    for (std::int64_t i = 0; i < c.n; ++i) host[static_cast<std::size_t>(i)] = (i * 7919) % c.vocab;
    check_cuda(cudaMalloc(&targets, host.size() * 8), "cudaMalloc");
    check_cuda(cudaMemcpy(targets, host.data(), host.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    for (void** p : {&logp, &lse}) check_cuda(cudaMalloc(p, static_cast<std::size_t>(c.n) * 4), "cudaMalloc");
    in.hidden = {x, c.dtype, c.n, c.hidden, 0};
    in.weight = {w, c.dtype, rows, c.hidden, 0};
    in.targets = {targets, DType::kInt64, c.n};
    out.logp = {logp, DType::kFP32, c.n};
    out.lse = {lse, DType::kFP32, c.n};
  }
  ~Buffers() {
    for (void* p : {x, w, targets, logp, lse}) cudaFree(p);
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;

  void *x = nullptr, *w = nullptr, *targets = nullptr, *logp = nullptr, *lse = nullptr;
  LinearLogpInputs in;
  LinearLogpOutputs out;
};

LinearLogpConfig config_of(const LinearLogpCase& c, std::int64_t start, std::int64_t rows, int device) {
  LinearLogpConfig config;
  config.hidden = c.hidden;
  config.vocab_start = start;
  config.vocab_local = rows;
  config.vocab_global = c.vocab;
  config.dtype = c.dtype;
  config.device = device;
  config.max_rows = c.n;  // the workspace is sized at build, not in the timed loop
  return config;
}

void run_rank(const LinearLogpTpCase& c, const TimingOptions& timing, int rank, const CommUniqueId& id) {
  check_cuda(cudaSetDevice(rank), "cudaSetDevice");
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Runtime runtime;
  // Long enough for a first-time compile on one rank while the other waits in the build.
  CommOptions options;
  options.timeout = std::chrono::minutes(10);
  Communicator comm = Communicator::create(runtime, rank, rank, c.tp, id, options);

  const LinearLogpCase& t = c.tp_case;
  const std::int64_t per_rank = (t.vocab + c.tp - 1) / c.tp;
  const std::int64_t start = std::min(t.vocab, per_rank * rank);
  const std::int64_t rows = std::min(per_rank, t.vocab - start);
  double tp_ms = 0;
  std::size_t tp_extra = 0;
  {
    Buffers buffers(t, start, rows);
    const std::size_t free_before = device_free_bytes();
    LinearLogp op(runtime, config_of(t, start, rows, rank), comm);
    tp_extra = free_before - std::min(free_before, device_free_bytes());
    comm.set_timeout(std::chrono::seconds(60));
    // Every rank runs the same fixed number of calls (a rank that chose its own count would
    // leave the other waiting in an all-gather).
    tp_ms = median_ms([&] { op.forward(buffers.in, buffers.out, stream); }, stream, timing);
    if (op.check(stream).bad_rows != 0) throw std::runtime_error("the TP forward reported bad targets");
  }
  const CombineStepTiming combine =
      time_tp_combine_step(runtime, comm, c.combine_rows, t.hidden, t.vocab, t.dtype, stream, timing);

  // The baseline: the single-GPU op over the whole vocabulary, on this rank's GPU. No
  // collectives: the ranks time it side by side.
  const LinearLogpCase& s = c.single_case;
  double single_ms = 0;
  {
    Buffers buffers(s, 0, s.vocab);
    LinearLogp op(runtime, config_of(s, 0, s.vocab, rank));
    single_ms = median_ms([&] { op.forward(buffers.in, buffers.out, stream); }, stream, timing);
  }

  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, rank), "cudaGetDeviceProperties");
  const double ratio = tp_ms / single_ms;
  const double combine_goal_us = 40.0;
  const double ratio_goal = 0.55;
  nlohmann::json row = {{"bench", "linear-logp-tp"},
                        {"case", t.name},
                        {"baseline_case", s.name},
                        {"tp", c.tp},
                        {"rank", rank},
                        {"n", t.n},
                        {"hidden", t.hidden},
                        {"vocab", t.vocab},
                        {"vocab_local", rows},
                        {"dtype", dtype_name(t.dtype)},
                        {"tp_fwd_ms", tp_ms},
                        {"single_fwd_ms", single_ms},
                        {"ratio", ratio},
                        {"ratio_goal", ratio_goal},
                        {"ratio_ok", ratio <= ratio_goal},
                        {"combine_n", c.combine_rows},
                        {"combine_splits", combine.splits},
                        {"combine_us", combine.median_us},
                        {"combine_nccl_path_us", combine.nccl_median_us},
                        {"combine_goal_us", combine_goal_us},
                        {"combine_ok", combine.median_us <= combine_goal_us},
                        {"extra_bytes", tp_extra},
                        {"device", prop.name},
                        {"date", today()}};
  std::printf("%s\n", row.dump().c_str());
  std::fflush(stdout);
  cudaStreamDestroy(stream);
}

}  // namespace

LinearLogpTpCase load_linear_logp_tp_case(const std::string& shapes_path, const std::string& tp_name,
                                          const std::string& single_name) {
  std::ifstream in(shapes_path);
  if (!in) throw std::runtime_error("cannot open shapes file '" + shapes_path + "'");
  const nlohmann::json shapes = nlohmann::json::parse(in);
  LinearLogpTpCase result;
  bool found_tp = false, found_single = false;
  for (const auto& c : shapes.at("linear_logp").at("cases")) {
    const std::string name = c.at("name");
    if (name != tp_name && name != single_name) continue;
    auto dtype = parse_dtype(c.at("dtype").get<std::string>());
    if (!dtype) throw std::runtime_error("unknown dtype in " + shapes_path);
    const LinearLogpCase parsed{name, c.at("n"), c.at("hidden"), c.at("vocab"), *dtype, false, false};
    if (name == tp_name) {
      result.tp_case = parsed;
      result.tp = c.at("tp").get<int>();
      found_tp = true;
    }
    if (name == single_name) {
      result.single_case = parsed;
      found_single = true;
    }
  }
  if (!found_tp || !found_single) {
    throw std::runtime_error("shapes file '" + shapes_path + "' has no case '" + (found_tp ? single_name : tp_name) + "'");
  }
  if (result.tp < 2) throw std::runtime_error("case '" + tp_name + "' has tp < 2");
  return result;
}

int run_linear_logp_tp_case(const LinearLogpTpCase& c, const TimingOptions& timing) {
  return run_rank_processes(c.tp, [&](int rank, const CommUniqueId& id) { run_rank(c, timing, rank, id); });
}

}  // namespace shardjit::bench
