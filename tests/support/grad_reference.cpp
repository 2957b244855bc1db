#include "support/grad_reference.hpp"

#include "support/parallel_for.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

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

ReferenceGrads reference_gradients(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                   const std::vector<std::int64_t>& dw_rows) {
  return reference_gradients(p, g, h, {}, dw_rows);
}

ReferenceGrads reference_gradients(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                   const std::vector<float>& e, const std::vector<std::int64_t>& dw_rows) {
  const std::int64_t H = p.hidden, V = p.vocab_local;
  const std::int64_t valid = std::clamp<std::int64_t>(p.valid_vocab - p.vocab_start, 0, V);
  std::vector<std::int64_t> rows = dw_rows;
  if (rows.empty()) {
    for (std::int64_t v = 0; v < V; ++v) rows.push_back(v);
  }
  const auto S = static_cast<std::int64_t>(rows.size());
  ReferenceGrads r;
  r.dx.assign(static_cast<std::size_t>(p.n * H), 0.0);
  std::vector<double> dz_rows(static_cast<std::size_t>(p.n * S), 0.0);  // dZ of the dW rows
  const auto workers = static_cast<std::size_t>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::vector<double>> db_parts(workers, std::vector<double>(static_cast<std::size_t>(V), 0.0));
  parallel_for(p.n, [&](std::int64_t worker, std::int64_t i) {
    const std::int64_t t = p.targets[static_cast<std::size_t>(i)];
    if (t == p.ignore_index || t < 0 || t >= p.valid_vocab) return;
    const float* x = p.hidden_values.data() + i * H;
    std::vector<double> z(static_cast<std::size_t>(valid));
    double m = -INFINITY;
    for (std::int64_t v = 0; v < valid; ++v) {
      const float* w = p.weight_values.data() + v * H;
      double acc = dot_fp64(x, w, H);
      if (!p.bias_values.empty()) acc += p.bias_values[static_cast<std::size_t>(v)];
      z[static_cast<std::size_t>(v)] = acc / p.temperature;
      m = std::max(m, z[static_cast<std::size_t>(v)]);
    }
    double sum = 0;
    for (double value : z) sum += std::exp(value - m);
    const double lse = m + std::log(sum);
    double entropy = lse;  // H = lse - sum_v p_v z_v
    for (double value : z) {
      if (value > -INFINITY) entropy -= std::exp(value - lse) * value;  // a forbidden token adds nothing
    }
    const double gi = g[static_cast<std::size_t>(i)], hi = h[static_cast<std::size_t>(i)];
    const double ei = e.empty() ? 0.0 : e[static_cast<std::size_t>(i)];
    double* dx = r.dx.data() + i * H;
    std::vector<double>& db = db_parts[static_cast<std::size_t>(worker)];
    for (std::int64_t v = 0; v < valid; ++v) {
      const double zv = z[static_cast<std::size_t>(v)];
      const double pv = std::exp(zv - lse);
      const double entropy_term = pv > 0 ? ei * pv * (zv - (lse - entropy)) : 0.0;  // 0 where z = -inf
      const double dz = ((v == t - p.vocab_start ? gi : 0.0) + (hi - gi) * pv - entropy_term) / p.temperature;
      db[static_cast<std::size_t>(v)] += dz;
      const float* w = p.weight_values.data() + v * H;
      for (std::int64_t k = 0; k < H; ++k) dx[k] += dz * w[k];
      z[static_cast<std::size_t>(v)] = dz;
    }
    for (std::int64_t s = 0; s < S; ++s) {
      const std::int64_t v = rows[static_cast<std::size_t>(s)];
      dz_rows[static_cast<std::size_t>(i * S + s)] = v < valid ? z[static_cast<std::size_t>(v)] : 0.0;
    }
  });
  r.db.assign(static_cast<std::size_t>(V), 0.0);
  for (const auto& part : db_parts)
    for (std::int64_t v = 0; v < V; ++v) r.db[static_cast<std::size_t>(v)] += part[static_cast<std::size_t>(v)];
  r.dw.assign(static_cast<std::size_t>(S * H), 0.0);
  parallel_for(S, [&](std::int64_t, std::int64_t s) {
    double* dw = r.dw.data() + s * H;
    for (std::int64_t i = 0; i < p.n; ++i) {
      const double d = dz_rows[static_cast<std::size_t>(i * S + s)];
      if (d == 0.0) continue;
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

GradDtypes grad_dtypes(DType dtype, std::optional<DType> bias, bool grad_weight_fp32) {
  return {dtype, grad_weight_fp32 ? DType::kFP32 : dtype, grad_weight_fp32 || !bias ? DType::kFP32 : *bias};
}

}  // namespace shardjit::testing
