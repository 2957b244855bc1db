#include "linear_logp_bench.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "board_energy.hpp"
#include "device_data.hpp"
#include "fwd_plan_row.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
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


// The caller's buffers of a case (targets, outputs, upstream gradients, gradients), allocated
// before the op so that they do not count as its extra memory.
class CaseBuffers {
 public:
  explicit CaseBuffers(const LinearLogpCase& c) {
    try {
      allocate(c);
    } catch (...) {
      release();  // a constructor that throws runs no destructor
      throw;
    }
  }
  ~CaseBuffers() { release(); }
  CaseBuffers(const CaseBuffers&) = delete;
  CaseBuffers& operator=(const CaseBuffers&) = delete;

  void *targets = nullptr, *logp = nullptr, *lse = nullptr, *entropy = nullptr;
  void *grad_logp = nullptr, *grad_lse = nullptr, *grad_entropy = nullptr, *grad_hidden = nullptr,
       *grad_weight = nullptr;

 private:
  void allocate(const LinearLogpCase& c) {
    std::vector<std::int64_t> host_targets(static_cast<std::size_t>(c.n));
    const std::int64_t tokens = c.valid_vocab > 0 ? c.valid_vocab : c.vocab;
    for (std::int64_t i = 0; i < c.n; ++i) host_targets[static_cast<std::size_t>(i)] = (i * 7919) % tokens;
    check_cuda(cudaMalloc(&targets, host_targets.size() * 8), "cudaMalloc");
    check_cuda(cudaMemcpy(targets, host_targets.data(), host_targets.size() * 8, cudaMemcpyHostToDevice), "cudaMemcpy");
    for (void** p : {&logp, &lse, &entropy}) check_cuda(cudaMalloc(p, static_cast<std::size_t>(c.n) * 4), "cudaMalloc");
    grad_logp = random_device(static_cast<std::size_t>(c.n), DType::kFP32, 1.0f, 3);
    grad_lse = random_device(static_cast<std::size_t>(c.n), DType::kFP32, 0.1f, 4);
    if (c.entropy) grad_entropy = random_device(static_cast<std::size_t>(c.n), DType::kFP32, 0.05f, 5);
    if (c.backward) {
      check_cuda(cudaMalloc(&grad_hidden, static_cast<std::size_t>(c.n * c.hidden) * dtype_size(c.dtype)), "cudaMalloc");
      check_cuda(cudaMalloc(&grad_weight, static_cast<std::size_t>(c.vocab * c.hidden) * dtype_size(c.dtype)), "cudaMalloc");
    }
  }
  void release() {
    for (void* p : {targets, logp, lse, entropy, grad_logp, grad_lse, grad_entropy, grad_hidden, grad_weight}) {
      cudaFree(p);
    }
  }
};

// The baseline: logits = X W^T with fp32 accumulation into the input dtype, as a framework's
// unfused LM head computes them. Each call takes the next set of inputs.
class CublasLmHead {
 public:
  CublasLmHead(const LinearLogpCase& c, RotatingInputs& inputs, cudaStream_t stream) : c_(c), inputs_(inputs) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    check_cuda(cudaMalloc(&logits_, static_cast<std::size_t>(c.n * c.vocab) * dtype_size(c.dtype)), "cudaMalloc logits");
  }
  ~CublasLmHead() {
    cublasDestroy(handle_);
    cudaFree(logits_);
  }
  CublasLmHead(const CublasLmHead&) = delete;
  CublasLmHead& operator=(const CublasLmHead&) = delete;

  void operator()() {
    const std::vector<void*>& set = inputs_.set(turn_++);
    const float alpha = 1.0f, beta = 0.0f;
    const auto n = static_cast<int>(c_.n), h = static_cast<int>(c_.hidden), v = static_cast<int>(c_.vocab);
    const cudaDataType_t type = cuda_type(c_.dtype);
    check_cublas(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, v, n, h, &alpha, set[1], type, h, set[0], type, h,
                              &beta, logits_, type, v, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

 private:
  const LinearLogpCase& c_;
  RotatingInputs& inputs_;
  cublasHandle_t handle_ = nullptr;
  void* logits_ = nullptr;
  std::size_t turn_ = 0;
};

// The op's forward (and backward) on the next set of inputs, into the case's buffers.
class FusedCall {
 public:
  FusedCall(const LinearLogpCase& c, LinearLogp& op, RotatingInputs& inputs, const CaseBuffers& buffers,
            cudaStream_t stream)
      : c_(c), op_(op), inputs_(inputs), b_(buffers), stream_(stream) {
    out_.logp = {b_.logp, DType::kFP32, c.n};
    out_.lse = {b_.lse, DType::kFP32, c.n};
    if (c.entropy) out_.entropy = {b_.entropy, DType::kFP32, c.n};
    grads_.hidden = {b_.grad_hidden, c.dtype, c.n, c.hidden, 0};
    grads_.weight = {b_.grad_weight, c.dtype, c.vocab, c.hidden, 0};
    upstream_.lse = out_.lse;
    upstream_.grad_logp = {b_.grad_logp, DType::kFP32, c.n};
    upstream_.grad_lse = {b_.grad_lse, DType::kFP32, c.n};
    if (c.entropy) {  // a loss with an entropy term: its gradient too
      upstream_.entropy = out_.entropy;
      upstream_.grad_entropy = {b_.grad_entropy, DType::kFP32, c.n};
    }
  }

  void operator()() {
    const std::vector<void*>& set = inputs_.set(turn_++);
    LinearLogpInputs in;
    in.hidden = {set[0], c_.dtype, c_.n, c_.hidden, 0};
    in.weight = {set[1], c_.dtype, c_.vocab, c_.hidden, 0};
    in.targets = {b_.targets, DType::kInt64, c_.n};
    op_.forward(in, out_, stream_);
    if (!c_.backward) return;
    op_.backward(in, upstream_, grads_, stream_);
  }

 private:
  const LinearLogpCase& c_;
  LinearLogp& op_;
  RotatingInputs& inputs_;
  const CaseBuffers& b_;
  cudaStream_t stream_;
  LinearLogpOutputs out_;
  LinearLogpBackwardInputs upstream_;
  LinearLogpGrads grads_;
  std::size_t turn_ = 0;
};

// The board's energy per call of the op and of the baseline, where --energy asks for it.
void add_energy(nlohmann::json& row, const TimingOptions& timing, const std::function<void()>& fused,
                const std::function<void()>& gemm, cudaStream_t stream) {
  if (timing.energy_seconds <= 0) return;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const BoardEnergy meter(device);
  const std::optional<EnergyPerCall> fused_energy = meter.measure(fused, stream, timing.energy_seconds);
  const std::optional<EnergyPerCall> gemm_energy = meter.measure(gemm, stream, timing.energy_seconds);
  if (!fused_energy || !gemm_energy) {
    row["energy"] = "not measured: NVML or its energy counter is unavailable";
    return;
  }
  row["fused_joules"] = fused_energy->joules;
  row["gemm_joules"] = gemm_energy->joules;
  row["energy_ratio"] = fused_energy->joules / gemm_energy->joules;
  row["fused_watts"] = fused_energy->watts;
  row["gemm_watts"] = gemm_energy->watts;
}

// The case's JSON row: its shape, both medians and their ratio, throughput, the op's extra memory.
nlohmann::json result_row(const LinearLogpCase& c, const TimingOptions& timing, double fused_ms, double gemm_ms,
                          std::size_t extra_bytes, std::size_t input_sets) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  const double flops = 2.0 * static_cast<double>(c.n) * static_cast<double>(c.vocab) * static_cast<double>(c.hidden);
  return {{"bench", c.backward ? "linear-logp-fwd-bwd" : "linear-logp"},
          {"mode", c.backward ? "fwd+bwd" : "fwd"},
          {"case", c.name},
          {"n", c.n},
          {"hidden", c.hidden},
          {"vocab", c.vocab},
          {"valid_vocab", c.valid_vocab},
          {"dtype", dtype_name(c.dtype)},
          {"entropy", c.entropy},
          {"keep_logits_bytes", c.keep_logits_bytes},
          {"fused_ms", fused_ms},
          {"gemm_ms", gemm_ms},
          {"ratio", fused_ms / gemm_ms},
          {"fused_tflops", flops / fused_ms / 1e9},
          {"gemm_tflops", flops / gemm_ms / 1e9},
          {"extra_bytes", extra_bytes},
          {"input_sets", input_sets},
          {"timing", timing.sequential ? "sequential" : "interleaved"},
          {"device", prop.name},
          {"date", today()}};
}

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
  // Everything the case allocates is freed when it returns or throws (a sweep goes on to the next
  // point, whose memory must not be taken by this one's).
  const CudaStream stream_owner(raw_stream, &cudaStreamDestroy);
  cudaStream_t stream = raw_stream;
  // X and W, in as many sets as make the op and the GEMM read them from memory (one set at the
  // standard shapes, whose W alone is larger than L2).
  const float w_scale = 4.0f / std::sqrt(static_cast<float>(c.hidden));
  RotatingInputs inputs({{static_cast<std::size_t>(c.n * c.hidden), 1.0f, 1},
                         {static_cast<std::size_t>(c.vocab * c.hidden), w_scale, 2}},
                        c.dtype);
  const CaseBuffers buffers(c);
  CublasLmHead gemm(c, inputs, stream);
  // Its first call allocates cuBLAS's workspace, which is not the op's extra memory.
  gemm();
  check_cuda(cudaStreamSynchronize(stream), "cuBLAS's first call");

  // The fused op: extra memory is what the op itself takes (workspace, status, modules).
  Runtime runtime;
  const std::size_t free_before = device_free_bytes();
  LinearLogpConfig config;
  config.hidden = c.hidden;
  config.vocab_local = c.vocab;
  config.valid_vocab = c.valid_vocab;
  config.dtype = c.dtype;
  config.want_entropy = c.entropy;
  config.want_backward = c.backward;
  config.keep_logits_bytes = c.keep_logits_bytes;
  LinearLogp op(runtime, config);
  FusedCall fused(c, op, inputs, buffers, stream);
  const std::function<void()> fused_call = std::ref(fused), gemm_call = std::ref(gemm);
  // The op and its baseline timed in interleaved rounds: the same clocks and temperature for both.
  const std::vector<double> medians =
      timing.sequential
          ? std::vector<double>{median_ms(fused_call, stream, timing), median_ms(gemm_call, stream, timing)}
          : interleaved_median_ms({fused_call, gemm_call}, stream, timing);
  const std::size_t free_after = device_free_bytes();
  nlohmann::json row = result_row(c, timing, medians[0], medians[1],
                                  free_before > free_after ? free_before - free_after : 0, inputs.sets());
  if (!c.backward) {
    // The plan the op ran (a fwd+bwd point's forward may keep chunks instead, as its budget says).
    const LinearLogp::Impl& impl = op.impl();
    const std::int64_t row_bytes = c.hidden * static_cast<std::int64_t>(dtype_size(c.dtype));
    row["fwd_plan"] = fwd_plan_row(impl.vocab_split(c.n), c.n, row_bytes, impl.device.info().sm_count);
  }
  add_energy(row, timing, fused_call, gemm_call, stream);
  return row;
}

}  // namespace shardjit::bench
