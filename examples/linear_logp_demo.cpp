// The LinearLogp smoke demo: log-probabilities of target tokens under a random LM head on the
// GPU, checked against a double-precision CPU computation of a few rows.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <shardjit/shardjit.hpp>

namespace {

void check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

std::uint16_t to_bf16(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

template <class T>
T* to_device(const std::vector<T>& host) {
  T* device = nullptr;
  check(cudaMalloc(&device, host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return device;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("shardjit-demo: no GPU here, nothing to run\n");
    return 0;
  }
  const std::int64_t n = 333, hidden = 1024, vocab = 50257;  // shapes that are not multiples of the tiles
  std::mt19937 rng(2026);
  std::uniform_real_distribution<float> x_dist(-1.0f, 1.0f), w_dist(-0.12f, 0.12f);
  std::vector<std::uint16_t> x(static_cast<std::size_t>(n * hidden)), w(static_cast<std::size_t>(vocab * hidden));
  for (auto& v : x) v = to_bf16(x_dist(rng));
  for (auto& v : w) v = to_bf16(w_dist(rng));
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  for (auto& t : targets) t = static_cast<std::int64_t>(rng() % vocab);

  try {
    shardjit::Runtime runtime;
    shardjit::LinearLogpConfig config;
    config.hidden = hidden;
    config.vocab_local = vocab;
    config.want_entropy = true;
    shardjit::LinearLogp op(runtime, config);  // kernels are compiled or loaded here

    auto* d_x = to_device(x);
    auto* d_w = to_device(w);
    auto* d_t = to_device(targets);
    float *d_logp, *d_lse, *d_entropy;
    for (float** p : {&d_logp, &d_lse, &d_entropy}) check(cudaMalloc(p, static_cast<std::size_t>(n) * 4), "cudaMalloc");

    op.forward({{d_x, shardjit::DType::kBF16, n, hidden, 0},
                {d_w, shardjit::DType::kBF16, vocab, hidden, 0},
                {},
                {d_t, shardjit::DType::kInt64, n}},
               {{d_logp, shardjit::DType::kFP32, n}, {d_lse, shardjit::DType::kFP32, n}, {d_entropy, shardjit::DType::kFP32, n}},
               nullptr);
    std::vector<float> logp(static_cast<std::size_t>(n)), lse(static_cast<std::size_t>(n));
    check(cudaMemcpy(logp.data(), d_logp, logp.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(lse.data(), d_lse, lse.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");

    double worst = 0;
    for (std::int64_t row : {std::int64_t{0}, n / 2, n - 1}) {
      std::vector<double> z(static_cast<std::size_t>(vocab));
      double max = -INFINITY;
      for (std::int64_t v = 0; v < vocab; ++v) {
        double acc = 0;
        for (std::int64_t k = 0; k < hidden; ++k) {
          acc += static_cast<double>(from_bf16(x[static_cast<std::size_t>(row * hidden + k)])) *
                 from_bf16(w[static_cast<std::size_t>(v * hidden + k)]);
        }
        z[static_cast<std::size_t>(v)] = acc;
        max = std::max(max, acc);
      }
      double sum = 0;
      for (double value : z) sum += std::exp(value - max);
      const double ref = z[static_cast<std::size_t>(targets[static_cast<std::size_t>(row)])] - (max + std::log(sum));
      worst = std::max(worst, std::abs(ref - logp[static_cast<std::size_t>(row)]));
      std::printf("row %4lld: logp %.6f (reference %.6f), lse %.4f\n", static_cast<long long>(row),
                  logp[static_cast<std::size_t>(row)], ref, lse[static_cast<std::size_t>(row)]);
    }
    for (void* p : {static_cast<void*>(d_x), static_cast<void*>(d_w), static_cast<void*>(d_t),
                    static_cast<void*>(d_logp), static_cast<void*>(d_lse), static_cast<void*>(d_entropy)}) {
      cudaFree(p);
    }
    std::printf("shardjit-demo: max |logp - reference| = %.2e over the checked rows: %s\n", worst,
                worst < 2e-3 ? "ok" : "MISMATCH");
    return worst < 2e-3 ? 0 : 1;
  } catch (const shardjit::Error& e) {
    std::fprintf(stderr, "shardjit-demo: %s\n", e.what());
    return 1;
  }
}
