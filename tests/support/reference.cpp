#include "support/reference.hpp"

#include "support/parallel_for.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace shardjit::testing {

std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<std::uint16_t>(bits >> 16);
}

float bf16_to_float(std::uint16_t bits) {
  std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, 4);
  return value;
}

std::uint16_t float_to_fp16(float value) {
  _Float16 half = static_cast<_Float16>(value);
  std::uint16_t bits = 0;
  std::memcpy(&bits, &half, 2);
  return bits;
}

float fp16_to_float(std::uint16_t bits) {
  _Float16 half;
  std::memcpy(&half, &bits, 2);
  return static_cast<float>(half);
}

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<float> random_values(std::uint64_t seed, std::size_t count, float scale, DType dtype,
                                 std::vector<std::uint8_t>& bytes) {
  std::vector<float> values(count);
  bytes.assign(count * dtype_size(dtype), 0);
  const std::uint64_t stream = splitmix64(seed);
  parallel_for(static_cast<std::int64_t>(count), [&](std::int64_t, std::int64_t i) {
    const double unit = static_cast<double>(splitmix64(stream ^ (i * 0x632be59bd9b4e019ull)) >> 11) * 0x1.0p-53;
    float v = static_cast<float>((2.0 * unit - 1.0) * scale);
    if (dtype == DType::kBF16) {
      std::uint16_t b = float_to_bf16(v);
      v = bf16_to_float(b);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else if (dtype == DType::kFP16) {
      std::uint16_t b = float_to_fp16(v);
      v = fp16_to_float(b);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    values[i] = v;
  });
  return values;
}

LogpRow reference_logp_row(const LogpProblem& p, std::int64_t row) {
  const double inv_t = 1.0 / p.temperature;
  const std::int64_t valid = std::min(p.vocab_local, p.valid_vocab - p.vocab_start);
  std::vector<double> z(static_cast<std::size_t>(std::max<std::int64_t>(valid, 0)));
  const float* x = p.hidden_values.data() + row * p.hidden;
  double max = -std::numeric_limits<double>::infinity();
  for (std::int64_t v = 0; v < valid; ++v) {
    const float* w = p.weight_values.data() + v * p.hidden;
    double acc = 0;
    for (std::int64_t k = 0; k < p.hidden; ++k) acc += static_cast<double>(x[k]) * static_cast<double>(w[k]);
    if (!p.bias_values.empty()) acc += p.bias_values[static_cast<std::size_t>(v)];
    z[static_cast<std::size_t>(v)] = acc * inv_t;
    max = std::max(max, z[static_cast<std::size_t>(v)]);
  }
  double sum = 0, weighted = 0;
  for (double value : z) {
    double e = std::exp(value - max);
    sum += e;
    weighted += e * (value - max);
  }
  LogpRow out;
  out.lse = max + std::log(sum);
  out.entropy = std::log(sum) - weighted / sum;
  const std::int64_t t = p.targets[static_cast<std::size_t>(row)];
  if (t == p.ignore_index) {
    out.logp = 0;
  } else if (t < 0 || t >= p.valid_vocab) {
    out.bad_target = true;
    out.logp = std::numeric_limits<double>::quiet_NaN();
  } else if (t < p.vocab_start || t - p.vocab_start >= valid) {
    out.logp = -std::numeric_limits<double>::infinity();  // owned by another shard
  } else {
    out.logp = z[static_cast<std::size_t>(t - p.vocab_start)] - out.lse;
  }
  return out;
}

std::vector<LogpRow> reference_logp_rows(const LogpProblem& problem, const std::vector<std::int64_t>& rows) {
  std::vector<LogpRow> out(rows.size());
  parallel_for(static_cast<std::int64_t>(rows.size()), [&](std::int64_t, std::int64_t i) {
    out[static_cast<std::size_t>(i)] = reference_logp_row(problem, rows[static_cast<std::size_t>(i)]);
  });
  return out;
}

}  // namespace shardjit::testing
