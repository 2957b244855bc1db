#include "support/grad_reference.hpp"

#include "support/parallel_for.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace shardjit::testing {
std::vector<float> to_floats(const std::vector<std::uint8_t>& bytes, DType dtype, std::size_t count) {
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (dtype == DType::kFP32) {
      std::memcpy(&out[i], bytes.data() + 4 * i, 4);
      continue;
    }
    std::uint16_t half = 0;
    std::memcpy(&half, bytes.data() + 2 * i, 2);
    out[i] = dtype == DType::kBF16 ? bf16_to_float(half) : fp16_to_float(half);
  }
  return out;
}

ReferenceGrads reference_gradients(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h) {
  const std::int64_t H = p.hidden, V = p.vocab_local, valid = std::min(p.vocab_local, p.valid_vocab);
  ReferenceGrads r;
  r.dx.assign(static_cast<std::size_t>(p.n * H), 0.0);
  std::vector<double> dz(static_cast<std::size_t>(p.n * V), 0.0);
  parallel_for(p.n, [&](std::int64_t, std::int64_t i) {
    const std::int64_t t = p.targets[static_cast<std::size_t>(i)];
    if (t == p.ignore_index || t < 0 || t >= p.valid_vocab) return;
    const float* x = p.hidden_values.data() + i * H;
    double* z = dz.data() + i * V;
    double m = -INFINITY;
    for (std::int64_t v = 0; v < valid; ++v) {
      const float* w = p.weight_values.data() + v * H;
      double acc = 0;
      for (std::int64_t k = 0; k < H; ++k) acc += static_cast<double>(x[k]) * w[k];
      if (!p.bias_values.empty()) acc += p.bias_values[static_cast<std::size_t>(v)];
      z[v] = acc / p.temperature;
      m = std::max(m, z[v]);
    }
    double sum = 0;
    for (std::int64_t v = 0; v < valid; ++v) sum += std::exp(z[v] - m);
    const double lse = m + std::log(sum);
    const double gi = g[static_cast<std::size_t>(i)], hi = h[static_cast<std::size_t>(i)];
    double* dx = r.dx.data() + i * H;
    for (std::int64_t v = 0; v < valid; ++v) {
      z[v] = ((v == t ? gi : 0.0) + (hi - gi) * std::exp(z[v] - lse)) / p.temperature;
      const float* w = p.weight_values.data() + v * H;
      for (std::int64_t k = 0; k < H; ++k) dx[k] += z[v] * w[k];
    }
  });
  r.dw.assign(static_cast<std::size_t>(V * H), 0.0);
  r.db.assign(static_cast<std::size_t>(V), 0.0);
  parallel_for(V, [&](std::int64_t, std::int64_t v) {
    double* dw = r.dw.data() + v * H;
    for (std::int64_t i = 0; i < p.n; ++i) {
      const double d = dz[static_cast<std::size_t>(i * V + v)];
      if (d == 0.0) continue;
      r.db[static_cast<std::size_t>(v)] += d;
      const float* x = p.hidden_values.data() + i * H;
      for (std::int64_t k = 0; k < H; ++k) dw[k] += d * x[k];
    }
  });
  return r;
}

double rel_norm(const std::vector<float>& out, const std::vector<double>& ref) {
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) return INFINITY;
    const double d = out[i] - ref[i];
    err2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
}

double grad_tolerance(DType dz, DType out) {
  auto of = [](DType d) { return d == DType::kFP32 ? 1e-4 : d == DType::kFP16 ? 4e-3 : 2e-2; };
  return std::max(of(dz), of(out));
}

}  // namespace shardjit::testing
