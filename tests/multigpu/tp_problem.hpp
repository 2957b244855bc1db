// The tensor-parallel LinearLogp problems of the multi-GPU tests, what a rank does with them,
// and the comparisons the test process makes of the ranks' reports. Every rank generates its
// inputs itself, from the problem's seed and element indices, so each builds exactly its slice
// of the same full tensors (and rank 0 the full ones, for the single-GPU reference).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/driver/device.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/rank_processes.hpp"
#include "support/reference.hpp"

// Skips the test (with the reason) unless this machine can run `ranks` rank processes.
#define SHARDJIT_REQUIRE_GPUS(ranks)                                                  \
  do {                                                                                \
    const std::string skip_reason = ::shardjit::testing::multi_gpu_skip_reason(ranks); \
    if (!skip_reason.empty()) GTEST_SKIP() << skip_reason;                            \
  } while (0)

namespace shardjit::testing {

struct TpProblem {
  std::int64_t n = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;                 // V_global
  std::vector<std::int64_t> shard_sizes;  // per rank; empty: even, ceil(V / tp) each
  std::int64_t valid_vocab = 0;           // 0: all
  DType dtype = DType::kBF16;
  bool bias = true;  // bf16
  bool entropy = true;
  float temperature = 0.7f;
  std::uint64_t seed = 7;
};

// Most cases: small, odd row count, shards that end inside a 256-column tile.
inline TpProblem base_problem() { return TpProblem{200, 256, 1000}; }

// Uneven shards, padding in the last one.
inline TpProblem uneven_problem() {
  TpProblem p{96, 256, 1000};
  p.shard_sizes = {384, 616};
  p.valid_vocab = 990;
  return p;
}

// Llama-3-8B's LM head, split over two GPUs.
inline TpProblem llama_problem() {
  TpProblem p{256, 4096, 128256};
  p.bias = false;
  p.temperature = 1.0f;
  return p;
}

struct Shard {
  std::int64_t start = 0;
  std::int64_t size = 0;
};

inline Shard shard_of(const TpProblem& p, int rank, int size) {
  if (!p.shard_sizes.empty()) {
    Shard s;
    for (int r = 0; r < rank; ++r) s.start += p.shard_sizes[static_cast<std::size_t>(r)];
    s.size = p.shard_sizes[static_cast<std::size_t>(rank)];
    return s;
  }
  const std::int64_t per = (p.vocab + size - 1) / size;
  const std::int64_t start = std::min(p.vocab, per * rank);
  return {start, std::min(per, p.vocab - start)};
}

inline Shard full_vocab(const TpProblem& p) { return {0, p.vocab}; }

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Device bytes of elements [begin, begin + count) of a random tensor of stream `seed`, values
// uniform in [-scale, scale] rounded to `dtype` (never zeros). Element i depends on (seed, i)
// only, so slices of one tensor made by different ranks agree.
inline std::vector<std::uint8_t> random_bytes(std::uint64_t seed, std::int64_t begin, std::int64_t count, float scale,
                                              DType dtype) {
  const std::size_t elem = dtype_size(dtype);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(count) * elem);
  const std::uint64_t stream = mix(seed);
  auto fill = [&](std::int64_t from, std::int64_t to) {
    for (std::int64_t i = from; i < to; ++i) {
      const std::uint64_t index = static_cast<std::uint64_t>(begin + i);
      const double unit = static_cast<double>(mix(stream ^ (index * 0x632be59bd9b4e019ull)) >> 11) * 0x1.0p-53;
      const float v = static_cast<float>((2.0 * unit - 1.0) * scale);
      std::uint8_t* out = bytes.data() + static_cast<std::size_t>(i) * elem;
      if (dtype == DType::kBF16) {
        const std::uint16_t b = float_to_bf16(v);
        std::memcpy(out, &b, 2);
      } else if (dtype == DType::kFP16) {
        const std::uint16_t b = float_to_fp16(v);
        std::memcpy(out, &b, 2);
      } else {
        std::memcpy(out, &v, 4);
      }
    }
  };
  const std::int64_t workers = std::max<std::int64_t>(1, std::thread::hardware_concurrency());
  const std::int64_t chunk = (count + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (std::int64_t from = 0; from < count; from += chunk) threads.emplace_back(fill, from, std::min(count, from + chunk));
  for (auto& t : threads) t.join();
  return bytes;
}

inline std::int64_t valid_of(const TpProblem& p) { return p.valid_vocab ? p.valid_vocab : p.vocab; }

// Random targets, with the shard boundaries and the ends of the vocabulary among them.
inline std::vector<std::int64_t> make_targets(const TpProblem& p) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(p.n));
  const std::int64_t valid = valid_of(p);
  for (std::int64_t i = 0; i < p.n; ++i) t[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(mix(p.seed * 31 + static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(valid));
  const std::int64_t edges[] = {0, valid - 1, shard_of(p, 1, 2).start - 1, shard_of(p, 1, 2).start};
  for (std::size_t i = 0; i < std::size(edges) && static_cast<std::int64_t>(i) < p.n; ++i) t[i] = edges[i];
  return t;
}

inline LinearLogpConfig config_for(const TpProblem& p, Shard shard, int device) {
  LinearLogpConfig c;
  c.hidden = p.hidden;
  c.vocab_start = shard.start;
  c.vocab_local = shard.size;
  c.vocab_global = p.vocab;
  c.valid_vocab = p.valid_vocab;
  c.dtype = p.dtype;
  if (p.bias) c.bias_dtype = DType::kBF16;
  c.target_dtype = DType::kInt64;
  c.temperature = p.temperature;
  c.want_entropy = p.entropy;
  c.device = device;
  return c;
}

// One rank's inputs (its shard of the weight and bias) and outputs, on its GPU.
struct RankTensors {
  RankTensors(const TpProblem& p, Shard s, const std::vector<std::int64_t>& target_ids, const DeviceContext& device)
      : problem(p),
        shard(s),
        hidden(DeviceArray::from(random_bytes(p.seed, 0, p.n * p.hidden, 1.0f, p.dtype), device)),
        weight(DeviceArray::from(random_bytes(p.seed + 1, s.start * p.hidden, s.size * p.hidden,
                                              4.0f / std::sqrt(static_cast<float>(p.hidden)), p.dtype),
                                 device)),
        bias(DeviceArray::from(random_bytes(p.seed + 2, s.start, s.size, 1.0f, DType::kBF16), device)),
        targets(DeviceArray::from(target_ids, device)),
        logp(static_cast<std::size_t>(p.n) * 4, device),
        lse(static_cast<std::size_t>(p.n) * 4, device),
        entropy(static_cast<std::size_t>(p.n) * 4, device) {}

  LinearLogpInputs inputs() const {
    LinearLogpInputs in;
    in.hidden = {hidden.data(), problem.dtype, problem.n, problem.hidden, 0};
    in.weight = {weight.data(), problem.dtype, shard.size, problem.hidden, 0};
    if (problem.bias) in.bias = {bias.data(), DType::kBF16, shard.size};
    in.targets = {targets.data(), DType::kInt64, problem.n};
    return in;
  }

  LinearLogpOutputs outputs() const {
    LinearLogpOutputs out;
    out.logp = {logp.data(), DType::kFP32, problem.n};
    out.lse = {lse.data(), DType::kFP32, problem.n};
    if (problem.entropy) out.entropy = {entropy.data(), DType::kFP32, problem.n};
    return out;
  }

  void poison() {
    for (DeviceArray* a : {&logp, &lse, &entropy}) a->fill_bytes(0xff);  // NaN: unwritten rows show
  }

  // Puts logp, lse and entropy into the report, under `prefix`.
  void report(RankReport& to, const std::string& prefix) const {
    const auto n = static_cast<std::size_t>(problem.n);
    to.put(prefix + "logp", logp.to_vector<float>(n));
    to.put(prefix + "lse", lse.to_vector<float>(n));
    if (problem.entropy) to.put(prefix + "entropy", entropy.to_vector<float>(n));
  }

  TpProblem problem;
  Shard shard;
  DeviceArray hidden, weight, bias, targets, logp, lse, entropy;
};

inline CommOptions comm_options(std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  CommOptions options;
  options.timeout = timeout;
  return options;
}

// This rank's communicator over the group of `ctx`, on GPU ctx.rank.
inline Communicator rank_communicator(Runtime& runtime, const RankContext& ctx, const CommOptions& options = comm_options()) {
  return Communicator::create(runtime, ctx.rank, ctx.rank, ctx.size, ctx.unique_id, options);
}

// What op.check(nullptr) says, for a rank's report: "no error", or the error's code and message.
template <class Op>
std::string check_outcome(Op& op) {
  try {
    op.check(nullptr);
    return "no error";
  } catch (const Error& e) {
    return std::to_string(static_cast<int>(e.code())) + " " + e.what();
  }
}

// True when a check_outcome is an Error(kCommError).
inline bool is_comm_error(const std::string& outcome) {
  return outcome.rfind(std::to_string(static_cast<int>(ErrorCode::kCommError)) + " ", 0) == 0;
}

// One rank's side of a TP LinearLogp test: its runtime, its communicator on GPU ctx.rank, its
// shard of the problem and the tensors of that shard. Tests take the members by name:
//   TpRank rank(ctx, p, targets);
//   auto& [runtime, comm, device, shard, tensors] = rank;
struct TpRank {
  TpRank(const RankContext& ctx, const TpProblem& p, const std::vector<std::int64_t>& targets)
      : comm(rank_communicator(runtime, ctx)),
        device(runtime.impl().device(ctx.rank)),
        shard(shard_of(p, ctx.rank, ctx.size)),
        tensors(p, shard, targets, device) {}
  Runtime runtime;
  Communicator comm;
  const DeviceContext& device;
  const Shard shard;
  RankTensors tensors;
};

// Rank 0 only: the single-GPU op over the whole vocabulary on the same inputs; reports under
// "ref_".
inline void report_single_gpu_reference(Runtime& runtime, const TpProblem& p, const std::vector<std::int64_t>& targets,
                                        const DeviceContext& device, RankReport& report) {
  RankTensors full(p, full_vocab(p), targets, device);
  LinearLogp op(runtime, config_for(p, full_vocab(p), device.info().ordinal));
  full.poison();
  op.forward(full.inputs(), full.outputs(), nullptr);
  const BadTargetReport bad = op.check(nullptr);
  full.report(report, "ref_");
  report.put_text("ref_bad_rows", std::to_string(bad.bad_rows));
}

// The TP forward of `p` on this rank, reported under "tp_" (with its bad-target record); rank 0
// adds the single-GPU reference when `reference` is set.
inline void run_tp_forward_rank(RankContext& ctx, const TpProblem& p, const std::vector<std::int64_t>& targets,
                                bool reference) {
  TpRank rank(ctx, p, targets);
  auto& [runtime, comm, device, shard, tensors] = rank;
  LinearLogp op(runtime, config_for(p, shard, ctx.rank), comm);
  tensors.poison();
  op.forward(tensors.inputs(), tensors.outputs(), nullptr);
  const BadTargetReport bad = op.check(nullptr);
  tensors.report(ctx.report, "tp_");
  ctx.report.put_text("tp_bad_rows", std::to_string(bad.bad_rows));
  ctx.report.put_text("tp_first_bad_id", std::to_string(bad.first_bad_id));
  if (reference && ctx.rank == 0) report_single_gpu_reference(runtime, p, targets, device, ctx.report);
}

// Differences of `got` from `ref`; NaN must sit where the reference has NaN.
struct Diff {
  double max_abs = 0;
  double rel_norm = 0;
  std::int64_t nan_mismatches = 0;
};

inline Diff compare(const std::vector<float>& got, const std::vector<float>& ref) {
  Diff d;
  double err2 = 0, ref2 = 0;
  if (got.size() != ref.size()) {
    d.nan_mismatches = -1;
    return d;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(ref[i])) {
      d.nan_mismatches += std::isnan(got[i]) != std::isnan(ref[i]) ? 1 : 0;
      continue;
    }
    const double e = std::abs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    d.max_abs = std::max(d.max_abs, e);
    err2 += e * e;
    ref2 += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  d.rel_norm = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return d;
}

inline bool bitwise_equal(const std::string& a, const std::string& b) { return a == b; }

inline std::vector<float> bf16_values(const std::vector<std::uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_float(bits[i]);
  return out;
}

inline double max_abs_of(const std::vector<float>& values) {
  double m = 0;
  for (float v : values) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// Every rank finished, and none raised.
inline void expect_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (const RankOutcome& o : outcomes) {
    EXPECT_TRUE(o.finished && o.error.empty()) << describe(outcomes);
  }
}

// Every rank's "tp_" outputs are bitwise the same, and match rank 0's single-GPU reference.
inline void expect_matches_single_gpu(const std::vector<RankOutcome>& outcomes, bool entropy, double tolerance) {
  ASSERT_FALSE(outcomes.empty());
  const RankReport& r0 = outcomes[0].report;
  for (const char* key : {"logp", "lse", "entropy"}) {
    if (std::string(key) == "entropy" && !entropy) continue;
    const std::string tp_key = std::string("tp_") + key;
    for (const RankOutcome& o : outcomes) {
      EXPECT_TRUE(bitwise_equal(o.report.bytes(tp_key), r0.bytes(tp_key)))
          << key << " of rank " << o.rank << " differs from rank 0's in some bit";
    }
    const Diff d = compare(r0.get<float>(tp_key), r0.get<float>(std::string("ref_") + key));
    std::printf("[ accuracy ] tp vs single-GPU %-8s max|d| %.3e rel-norm %.3e\n", key, d.max_abs, d.rel_norm);
    EXPECT_EQ(d.nan_mismatches, 0) << key;
    EXPECT_LE(d.max_abs, tolerance) << key;
  }
}

}  // namespace shardjit::testing
