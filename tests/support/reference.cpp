#include "support/reference.hpp"

#include "support/parallel_for.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

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

float store_as(float value, DType dtype, std::uint8_t* at) {
  if (dtype == DType::kBF16) {
    const std::uint16_t b = float_to_bf16(value);
    std::memcpy(at, &b, 2);
    return bf16_to_float(b);
  }
  if (dtype == DType::kFP16) {
    const std::uint16_t b = float_to_fp16(value);
    std::memcpy(at, &b, 2);
    return fp16_to_float(b);
  }
  std::memcpy(at, &value, 4);
  return value;
}

std::vector<float> random_values(std::uint64_t seed, std::size_t count, float scale, DType dtype,
                                 std::vector<std::uint8_t>& bytes) {
  std::vector<float> values(count);
  bytes.assign(count * dtype_size(dtype), 0);
  const std::uint64_t stream = splitmix64(seed);
  parallel_for(static_cast<std::int64_t>(count), [&](std::int64_t, std::int64_t i) {
    const double unit = static_cast<double>(splitmix64(stream ^ (i * 0x632be59bd9b4e019ull)) >> 11) * 0x1.0p-53;
    const float v = static_cast<float>((2.0 * unit - 1.0) * scale);
    values[i] = store_as(v, dtype, bytes.data() + i * static_cast<std::int64_t>(dtype_size(dtype)));
  });
  return values;
}

double dot_fp64(const float* x, const float* w, std::int64_t n) {
  constexpr int kLanes = 8;
  double part[kLanes] = {};
  std::int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes) {
    for (int j = 0; j < kLanes; ++j) part[j] += static_cast<double>(x[k + j]) * static_cast<double>(w[k + j]);
  }
  for (; k < n; ++k) part[0] += static_cast<double>(x[k]) * static_cast<double>(w[k]);
  double sum = 0;
  for (double value : part) sum += value;
  return sum;
}

namespace {

std::int64_t valid_columns(const LogpProblem& p) { return std::min(p.vocab_local, p.valid_vocab - p.vocab_start); }

// z of `row` over columns [begin, end) into z (the row's valid columns).
void row_logits(const LogpProblem& p, std::int64_t row, std::int64_t begin, std::int64_t end, std::vector<double>& z) {
  const double inv_t = 1.0 / p.temperature;
  const float* x = p.hidden_values.data() + row * p.hidden;
  for (std::int64_t v = begin; v < end; ++v) {
    double acc = dot_fp64(x, p.weight_values.data() + v * p.hidden, p.hidden);
    if (!p.bias_values.empty()) acc += p.bias_values[static_cast<std::size_t>(v)];
    z[static_cast<std::size_t>(v)] = acc * inv_t;
  }
}

// The row's statistics from its logits.
LogpRow row_from_logits(const LogpProblem& p, std::int64_t row, const std::vector<double>& z) {
  double max = -std::numeric_limits<double>::infinity();
  for (double value : z) max = std::max(max, value);
  double sum = 0, weighted = 0;
  for (double value : z) {
    double e = std::exp(value - max);
    sum += e;
    if (e > 0) weighted += e * (value - max);  // a forbidden token (z = -inf) adds nothing
  }
  LogpRow out;
  out.lse = max + std::log(sum);
  out.entropy = std::log(sum) - weighted / sum;
  const std::int64_t t = p.targets[static_cast<std::size_t>(row)];
  const std::int64_t valid = valid_columns(p);
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

}  // namespace

LogpRow reference_logp_row(const LogpProblem& p, std::int64_t row) {
  std::vector<double> z(static_cast<std::size_t>(std::max<std::int64_t>(valid_columns(p), 0)));
  row_logits(p, row, 0, static_cast<std::int64_t>(z.size()), z);
  return row_from_logits(p, row, z);
}

std::vector<LogpRow> reference_logp_rows(const LogpProblem& problem, const std::vector<std::int64_t>& rows) {
  std::vector<LogpRow> out(rows.size());
  const auto count = static_cast<std::int64_t>(rows.size());
  if (count >= static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()))) {
    parallel_for(count, [&](std::int64_t, std::int64_t i) {
      out[static_cast<std::size_t>(i)] = reference_logp_row(problem, rows[static_cast<std::size_t>(i)]);
    });
    return out;
  }
  // Few rows: each row's columns in blocks across the cores.
  constexpr std::int64_t kBlock = 1024;
  const std::int64_t valid = std::max<std::int64_t>(valid_columns(problem), 0);
  for (std::int64_t i = 0; i < count; ++i) {
    std::vector<double> z(static_cast<std::size_t>(valid));
    const std::int64_t row = rows[static_cast<std::size_t>(i)];
    parallel_for((valid + kBlock - 1) / kBlock, [&](std::int64_t, std::int64_t b) {
      row_logits(problem, row, b * kBlock, std::min(valid, (b + 1) * kBlock), z);
    });
    out[static_cast<std::size_t>(i)] = row_from_logits(problem, row, z);
  }
  return out;
}

}  // namespace shardjit::testing
