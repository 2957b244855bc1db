#include "linear_logp_bench.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "board_energy.hpp"
#include "device_data.hpp"
#include "shardjit/shardjit.hpp"

namespace shardjit::bench {
namespace {

void check_cublas(cublasStatus_t rc, const char* what) {
  if (rc != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(rc));
}

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kFP16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// Device buffers of one case, freed when it ends, also when it throws (a sweep goes on to the
// next point, whose memory must not be taken by this one's).
class CaseBuffers {
 public:
  CaseBuffers() = default;
  CaseBuffers(const CaseBuffers&) = delete;
  CaseBuffers& operator=(const CaseBuffers&) = delete;
  ~CaseBuffers() {
    for (void* p : buffers_) cudaFree(p);
  }
  void* allocate(std::size_t bytes, const char* what) {
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), what);
    buffers_.push_back(p);
    return p;
  }
  // Takes ownership of a buffer made elsewhere (random_device).
  void* adopt(void* p) {
    buffers_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> buffers_;
};

using CublasHandle = std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, decltype(&cublasDestroy)>;
using CudaStream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, decltype(&cudaStreamDestroy)>;

}  // namespace

std::vector<LinearLogpCase> load_linear_logp_cases(const std::string& shapes_path) {
  std::ifstream in(shapes_path);
  if (!in) throw std::runtime_error("cannot open shapes file '" + shapes_path + "'");
  nlohmann::json shapes = nlohmann::json::parse(in);
  std::vector<LinearLogpCase> cases;
  for (const auto& c : shapes.at("linear_logp").at("cases")) {
    if (c.at("tp").get<int>() != 1) continue;
    auto dtype = parse_dtype(c.at("dtype").get<std::string>());
    if (!dtype) throw std::runtime_error("unknown dtype in " + shapes_path);
    cases.push_back({c.at("name"), c.at("n"), c.at("hidden"), c.at("vocab"), *dtype, false});
  }
  return cases;
}

nlohmann::json run_linear_logp_case(const LinearLogpCase& c, const TimingOptions& timing) {
  cudaStream_t raw_stream = nullptr;
  check_cuda(cudaStreamCreate(&raw_stream), "cudaStreamCreate");
  const CudaStream stream_owner(raw_stream, &cudaStreamDestroy);
  cudaStream_t stream = raw_stream;
  CaseBuffers buffers;
  // X and W, in as many sets as make the op and the GEMM read them from memory (one set at the
  // standard shapes, whose W alone is larger than L2).
  const float w_scale = 4.0f / std::sqrt(static_cast<float>(c.hidden));
  RotatingInputs inputs({{static_cast<std::size_t>(c.n * c.hidden), 1.0f, 1},
                         {static_cast<std::size_t>(c.vocab * c.hidden), w_scale, 2}},
                        c.dtype);
  std::vector<std::int64_t> host_targets(static_cast<std::size_t>(c.n));
  for (std::int64_t i = 0; i < c.n; ++i) host_targets[static_cast<std::size_t>(i)] = (i * 7919) % c.vocab;
  void* const targets = buffers.allocate(host_targets.size() * 8, "cudaMalloc targets");
  check_cuda(cudaMemcpy(targets, host_targets.data(), host_targets.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
  void* const logp = buffers.allocate(static_cast<std::size_t>(c.n) * 4, "cudaMalloc logp");
  void* const lse = buffers.allocate(static_cast<std::size_t>(c.n) * 4, "cudaMalloc lse");
  void* const entropy = buffers.allocate(static_cast<std::size_t>(c.n) * 4, "cudaMalloc entropy");
  // Backward: the upstream gradients and the gradient buffers are the caller's, allocated
  // before the op so that they do not count as its extra memory.
  void* const grad_logp = buffers.adopt(random_device(static_cast<std::size_t>(c.n), DType::kFP32, 1.0f, 3));
  void* const grad_lse = buffers.adopt(random_device(static_cast<std::size_t>(c.n), DType::kFP32, 0.1f, 4));
  void *grad_hidden = nullptr, *grad_weight = nullptr;
  if (c.backward) {
    grad_hidden = buffers.allocate(static_cast<std::size_t>(c.n * c.hidden) * dtype_size(c.dtype), "cudaMalloc grad_hidden");
    grad_weight = buffers.allocate(static_cast<std::size_t>(c.vocab * c.hidden) * dtype_size(c.dtype), "cudaMalloc grad_weight");
  }

  // The baseline: logits = X W^T with fp32 accumulation into the input dtype, as a framework's
  // unfused LM head computes them.
  cublasHandle_t raw_handle = nullptr;
  check_cublas(cublasCreate(&raw_handle), "cublasCreate");
  const CublasHandle handle_owner(raw_handle, &cublasDestroy);
  cublasHandle_t handle = raw_handle;
  check_cublas(cublasSetStream(handle, stream), "cublasSetStream");
  void* const logits = buffers.allocate(static_cast<std::size_t>(c.n * c.vocab) * dtype_size(c.dtype), "cudaMalloc logits");
  const float alpha = 1.0f, beta = 0.0f;
  std::size_t gemm_turn = 0;
  auto gemm = [&] {
    const std::vector<void*>& set = inputs.set(gemm_turn++);
    void* const x = set[0];
    void* const w = set[1];
    check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(c.vocab), static_cast<int>(c.n),
                              static_cast<int>(c.hidden), &alpha, w, cuda_type(c.dtype), static_cast<int>(c.hidden), x,
                              cuda_type(c.dtype), static_cast<int>(c.hidden), &beta, logits, cuda_type(c.dtype),
                              static_cast<int>(c.vocab), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  // Its first call allocates cuBLAS's workspace, which is not the op's extra memory.
  gemm();
  check_cuda(cudaStreamSynchronize(stream), "cuBLAS's first call");

  // The fused op: extra memory is what the op itself takes (workspace, status, modules).
  Runtime runtime;
  const std::size_t free_before = device_free_bytes();
  LinearLogpConfig config;
  config.hidden = c.hidden;
  config.vocab_local = c.vocab;
  config.dtype = c.dtype;
  config.want_entropy = c.entropy;
  config.want_backward = c.backward;
  config.keep_logits_bytes = c.keep_logits_bytes;
  LinearLogp op(runtime, config);
  std::size_t fused_turn = 0;
  const auto next_inputs = [&] {
    const std::vector<void*>& set = inputs.set(fused_turn++);
    LinearLogpInputs in;
    in.hidden = {set[0], c.dtype, c.n, c.hidden, 0};
    in.weight = {set[1], c.dtype, c.vocab, c.hidden, 0};
    in.targets = {targets, DType::kInt64, c.n};
    return in;
  };
  LinearLogpOutputs out;
  out.logp = {logp, DType::kFP32, c.n};
  out.lse = {lse, DType::kFP32, c.n};
  if (c.entropy) out.entropy = {entropy, DType::kFP32, c.n};
  LinearLogpGrads grads;
  grads.hidden = {grad_hidden, c.dtype, c.n, c.hidden, 0};
  grads.weight = {grad_weight, c.dtype, c.vocab, c.hidden, 0};
  const VectorView lse_view{lse, DType::kFP32, c.n};
  const VectorView grad_logp_view{grad_logp, DType::kFP32, c.n}, grad_lse_view{grad_lse, DType::kFP32, c.n};
  auto fused = [&] {
    const LinearLogpInputs in = next_inputs();
    op.forward(in, out, stream);
    if (c.backward) op.backward(in, lse_view, grad_logp_view, grad_lse_view, grads, stream);
  };
  // The op and its baseline timed in interleaved rounds: the same clocks and temperature for both.
  const std::vector<double> medians =
      timing.sequential ? std::vector<double>{median_ms(fused, stream, timing), median_ms(gemm, stream, timing)}
                        : interleaved_median_ms({fused, gemm}, stream, timing);
  const double fused_ms = medians[0];
  const double gemm_ms = medians[1];
  const std::size_t free_after = device_free_bytes();
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const BoardEnergy meter(device);
  std::optional<EnergyPerCall> fused_energy;
  if (timing.energy_seconds > 0) fused_energy = meter.measure(fused, stream, timing.energy_seconds);

  std::optional<EnergyPerCall> gemm_energy;
  if (timing.energy_seconds > 0) gemm_energy = meter.measure(gemm, stream, timing.energy_seconds);
  const double flops = 2.0 * static_cast<double>(c.n) * static_cast<double>(c.vocab) * static_cast<double>(c.hidden);

  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  nlohmann::json row = {{"bench", c.backward ? "linear-logp-fwd-bwd" : "linear-logp"},
                        {"mode", c.backward ? "fwd+bwd" : "fwd"},
                        {"case", c.name},
                        {"n", c.n},
                        {"hidden", c.hidden},
                        {"vocab", c.vocab},
                        {"dtype", dtype_name(c.dtype)},
                        {"entropy", c.entropy},
                        {"keep_logits_bytes", c.keep_logits_bytes},
                        {"fused_ms", fused_ms},
                        {"gemm_ms", gemm_ms},
                        {"ratio", fused_ms / gemm_ms},
                        {"fused_tflops", flops / fused_ms / 1e9},
                        {"gemm_tflops", flops / gemm_ms / 1e9},
                        {"extra_bytes", free_before > free_after ? free_before - free_after : 0},
                        {"input_sets", inputs.sets()},
                        {"timing", timing.sequential ? "sequential" : "interleaved"},
                        {"device", prop.name},
                        {"date", today()}};
  if (timing.energy_seconds > 0 && !(fused_energy && gemm_energy)) {
    row["energy"] = "not measured: NVML or its energy counter is unavailable";
  } else if (fused_energy && gemm_energy) {
    row["fused_joules"] = fused_energy->joules;
    row["gemm_joules"] = gemm_energy->joules;
    row["energy_ratio"] = fused_energy->joules / gemm_energy->joules;
    row["fused_watts"] = fused_energy->watts;
    row["gemm_watts"] = gemm_energy->watts;
  }
  std::printf("%s\n", row.dump().c_str());
  std::fflush(stdout);
  return row;
}

}  // namespace shardjit::bench
