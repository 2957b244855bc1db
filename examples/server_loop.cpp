// A LinearLogp server loop: one Runtime and one op built at start-up from a model's config.json,
// then many requests of random row counts served on the server's own CUDA stream, each a
// forward on fresh random hidden states. Prints one JSON line: per-request latency percentiles
// (host time from enqueue to the result being on the host) and the throughput.
//
//   shardjit-server-loop [CONFIG.json] [REQUESTS]      (default: the bundled llama3-8b.json, 200)
//
// The Runtime takes its settings from the environment as a server's would: with SHARDJIT_JIT=0
// it only loads prewarmed kernels, and a missing one stops the start-up with the `shardjit
// prewarm` command that builds it. The config is read with the CLI's own reader
// (tools/cli/model_config.hpp), so it accepts what `shardjit prewarm` accepts.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <shardjit/shardjit.hpp>

#include "tools/cli/model_config.hpp"

namespace {

constexpr std::int64_t kMaxRows = 2048;  // rows of the largest request; the op's workspace is sized for it
constexpr int kWarmupRequests = 5;       // served first and not measured (first launches, page faults)

// Ends the program on a failed CUDA runtime call, naming it.
void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "shardjit-server-loop: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint16_t to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

std::uint16_t to_fp16(float v) {
  const _Float16 half = static_cast<_Float16>(v);
  std::uint16_t bits;
  std::memcpy(&bits, &half, 2);
  return bits;
}

// `count` values uniform in [-scale, scale] from a hash of (seed, index), written as `dtype` to
// `out`; on all cores, because an LM head holds hundreds of millions of them.
void fill_random(void* out, std::size_t count, float scale, shardjit::DType dtype, std::uint64_t seed) {
  const std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t chunk = (count + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (std::size_t begin = 0; begin < count; begin += chunk) {
    threads.emplace_back([=] {
      for (std::size_t i = begin; i < std::min(count, begin + chunk); ++i) {
        const double unit = static_cast<double>(splitmix64(seed * 0x100000001b3ull + i) >> 11) * 0x1.0p-53;
        const float v = static_cast<float>((2.0 * unit - 1.0) * scale);
        if (dtype == shardjit::DType::kFP32) {
          std::memcpy(static_cast<float*>(out) + i, &v, 4);
        } else {
          static_cast<std::uint16_t*>(out)[i] = dtype == shardjit::DType::kBF16 ? to_bf16(v) : to_fp16(v);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// The p-th percentile (nearest rank) of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

struct Options {
  std::string config_path = SHARDJIT_SERVER_LOOP_CONFIG;
  int requests = 200;
};

bool parse_options(int argc, char** argv, Options& options) {
  if (argc > 3) return false;
  if (argc > 1) options.config_path = argv[1];
  if (argc > 2) {
    char* end = nullptr;
    const long requests = std::strtol(argv[2], &end, 10);
    if (*end != '\0' || requests < 1 || requests > 1000000) return false;
    options.requests = static_cast<int>(requests);
  }
  return true;
}

// Device buffers of the server: the LM head, and the inputs and outputs of the largest request.
struct DeviceBuffers {
  void* weight = nullptr;
  void* hidden = nullptr;
  std::int64_t* targets = nullptr;
  float* logp = nullptr;

  DeviceBuffers(std::size_t weight_bytes, std::size_t hidden_bytes) {
    check(cudaMalloc(&weight, weight_bytes), "cudaMalloc(weight)");
    check(cudaMalloc(&hidden, hidden_bytes), "cudaMalloc(hidden)");
    check(cudaMalloc(&targets, kMaxRows * sizeof(std::int64_t)), "cudaMalloc(targets)");
    check(cudaMalloc(&logp, kMaxRows * sizeof(float)), "cudaMalloc(logp)");
  }
  ~DeviceBuffers() {
    for (void* p : {weight, hidden, static_cast<void*>(targets), static_cast<void*>(logp)}) cudaFree(p);
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
};

struct Summary {
  std::vector<double> latency_ms;  // measured requests only
  std::int64_t rows = 0;
  std::int64_t bad_logp = 0;       // not finite, or above 0 by more than rounding
};

int serve(const Options& options) {
  const shardjit::cli::ModelConfig model = shardjit::cli::load_model_config(options.config_path);
  const shardjit::DType dtype = shardjit::cli::model_dtype(model);
  const std::int64_t hidden = model.hidden, vocab = model.vocab;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("shardjit-server-loop: no GPU here, nothing to serve (model %s: hidden %lld, vocab %lld)\n",
                model.name.c_str(), static_cast<long long>(hidden), static_cast<long long>(vocab));
    return 0;
  }
  check(cudaSetDevice(0), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");

  // Start-up: the runtime (settings from the environment) and the op, built once.
  shardjit::Runtime runtime;
  shardjit::LinearLogpConfig config;
  config.hidden = hidden;
  config.vocab_local = vocab;
  config.dtype = dtype;
  config.max_rows = kMaxRows;  // workspace allocated now, never while serving
  shardjit::LinearLogp op(runtime, config);

  const std::size_t element = shardjit::dtype_size(dtype);
  const auto weight_count = static_cast<std::size_t>(vocab * hidden);
  const auto hidden_count = static_cast<std::size_t>(kMaxRows * hidden);
  DeviceBuffers device(weight_count * element, hidden_count * element);
  {
    std::vector<unsigned char> weight(weight_count * element);
    fill_random(weight.data(), weight_count, 4.0f / std::sqrt(static_cast<float>(hidden)), dtype, 1);
    check(cudaMemcpy(device.weight, weight.data(), weight.size(), cudaMemcpyHostToDevice), "cudaMemcpy(weight)");
  }
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  std::vector<unsigned char> hidden_host(hidden_count * element);
  std::vector<std::int64_t> targets_host(kMaxRows);
  float* logp_host = nullptr;  // pinned, so that the copy back is a real async copy
  check(cudaMallocHost(reinterpret_cast<void**>(&logp_host), kMaxRows * sizeof(float)), "cudaMallocHost");

  std::mt19937_64 rng(2026);
  std::uniform_int_distribution<std::int64_t> pick_rows(1, kMaxRows), pick_target(0, vocab - 1);
  Summary summary;
  for (int request = 0; request < kWarmupRequests + options.requests; ++request) {
    // A request arrives: its hidden states and targets are on the device before it is enqueued.
    const std::int64_t n = pick_rows(rng);
    const auto rows = static_cast<std::size_t>(n);
    fill_random(hidden_host.data(), rows * static_cast<std::size_t>(hidden), 1.0f, dtype, 1000 + static_cast<std::uint64_t>(request));
    for (std::size_t i = 0; i < rows; ++i) targets_host[i] = pick_target(rng);
    check(cudaMemcpyAsync(device.hidden, hidden_host.data(), rows * static_cast<std::size_t>(hidden) * element,
                          cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(hidden)");
    check(cudaMemcpyAsync(device.targets, targets_host.data(), rows * sizeof(std::int64_t), cudaMemcpyHostToDevice,
                          stream), "cudaMemcpyAsync(targets)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

    const auto start = std::chrono::steady_clock::now();
    op.forward({{device.hidden, dtype, n, hidden, 0},
                {device.weight, dtype, vocab, hidden, 0},
                {},
                {device.targets, shardjit::DType::kInt64, n}},
               {{device.logp, shardjit::DType::kFP32, n}, {}, {}}, stream);
    check(cudaMemcpyAsync(logp_host, device.logp, rows * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync(logp)");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    const auto end = std::chrono::steady_clock::now();

    if (request < kWarmupRequests) continue;
    summary.latency_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    summary.rows += n;
    for (std::size_t i = 0; i < rows; ++i) {
      if (!std::isfinite(logp_host[i]) || logp_host[i] > 1e-3f) ++summary.bad_logp;
    }
  }
  const shardjit::BadTargetReport report = op.check(stream);
  check(cudaFreeHost(logp_host), "cudaFreeHost");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");

  double total_ms = 0;
  for (double ms : summary.latency_ms) total_ms += ms;
  std::vector<double> sorted = summary.latency_ms;
  std::sort(sorted.begin(), sorted.end());
  nlohmann::ordered_json line;
  line["model"] = model.name;
  line["hidden"] = hidden;
  line["vocab"] = vocab;
  line["dtype"] = shardjit::dtype_name(dtype);
  line["device"] = prop.name;
  line["jit"] = runtime.jit_enabled();
  line["requests"] = options.requests;
  line["warmup_requests"] = kWarmupRequests;
  line["rows"] = summary.rows;
  line["p50_ms"] = percentile(sorted, 50);
  line["p90_ms"] = percentile(sorted, 90);
  line["p99_ms"] = percentile(sorted, 99);
  line["requests_per_s"] = static_cast<double>(options.requests) / (total_ms / 1e3);
  line["rows_per_s"] = static_cast<double>(summary.rows) / (total_ms / 1e3);
  line["bad_logp"] = summary.bad_logp;
  line["bad_targets"] = report.bad_rows;
  std::printf("%s\n", line.dump().c_str());
  return summary.bad_logp == 0 && report.bad_rows == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, options)) {
    std::fprintf(stderr, "usage: %s [CONFIG.json] [REQUESTS]\n", argv[0]);
    return 2;
  }
  try {
    return serve(options);
  } catch (const shardjit::Error& e) {
    // In cache-only mode (SHARDJIT_JIT=0) a missing kernel lands here, with the prewarm command.
    std::fprintf(stderr, "shardjit-server-loop: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardjit-server-loop: %s\n", e.what());
    return 1;
  }
}
