// LinearLogp backward on one GPU against fp64 CPU gradients over the same rounded inputs, on
// fresh random data: every dtype, upstream gradients of logp, of lse, of the entropy, alone or
// together, bias, temperature,
// ignored rows, padded vocabularies, odd shapes, many chunks, accumulation into existing
// gradients, dZ scaling at extreme gradient sizes, filtering, and bitwise-repeatable results.
// Outputs are poisoned (NaN) before each run, so an element the op fails to write fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compile/template_registry.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/grad_reference.hpp"
#include "support/logp_case.hpp"
#include "support/reference.hpp"
#include "support/runtime_with.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;

enum Upstream { kLogp = 1, kLse = 2, kBoth = 3, kEntropy = 4, kAll = 7 };

struct BwdCase : testing::LogpCase {
  int upstream = kBoth;
  bool ignore_rows = false;
  bool accumulate = false;
  bool grad_weight_fp32 = false;
  bool dz_fp32 = false;
  std::int64_t workspace = 0;  // backward_workspace_bytes; 0: default
  double grad_scale = 1.0;     // upstream gradients lie in [-grad_scale, grad_scale]
  double tolerance = 0;        // relative-norm bound; 0: by dtype
  float filter = 0;            // grad_filter_threshold
  bool quiet_rows = false;     // rows [128, 256) get upstream gradients 1e-4 times smaller
  std::int64_t keep = 0;       // keep_logits_bytes
  std::int64_t forbid_every = 0;  // forbidden tokens (bias -inf, testing::forbid_tokens); 0: none
};

Runtime& shared_runtime() {
  static Runtime runtime;  // cache folder from SHARDJIT_CACHE_DIR, shared across the suite
  return runtime;
}

using testing::to_floats;

// A problem and its fp64 gradients: grad_hidden and grad_bias in full, grad_weight on the
// sampled vocabulary rows (every row of a small vocabulary).
struct Problem {
  testing::LogpProblem p;
  std::vector<float> g, h, e;  // upstream gradients, 0 where absent
  std::vector<float> g_values, h_values, e_values;
  std::vector<std::int64_t> sampled;  // vocabulary rows whose grad_weight is compared
  std::vector<double> dx, dw, db;     // [n][H], [sampled][H], [V]
};

// The problem's fp64 gradients, grad_weight on the sampled rows.
void reference_gradients(Problem& pr) {
  testing::ReferenceGrads r = testing::reference_gradients(pr.p, pr.g, pr.h, pr.e, pr.sampled);
  pr.dx = std::move(r.dx);
  pr.dw = std::move(r.dw);
  pr.db = std::move(r.db);
}

Problem make_problem(const BwdCase& c, std::uint64_t seed, std::vector<std::uint8_t>& x_bytes,
                     std::vector<std::uint8_t>& w_bytes, std::vector<std::uint8_t>& b_bytes) {
  Problem pr;
  testing::LogpProblem& p = pr.p;
  p.n = c.n;
  p.hidden = c.hidden;
  p.vocab_local = c.vocab;
  p.valid_vocab = c.valid_vocab ? c.valid_vocab : c.vocab;
  p.temperature = c.temperature;
  p.hidden_values = testing::random_values(seed, static_cast<std::size_t>(c.n * c.hidden), 1.0f, c.dtype, x_bytes);
  const float w_scale = 4.0f / std::sqrt(static_cast<float>(c.hidden));
  p.weight_values = testing::random_values(seed + 1, static_cast<std::size_t>(c.vocab * c.hidden), w_scale, c.dtype, w_bytes);
  if (c.bias) p.bias_values = testing::random_values(seed + 2, static_cast<std::size_t>(c.vocab), 1.0f, *c.bias, b_bytes);
  std::mt19937_64 rng(seed + 3);
  std::uniform_int_distribution<std::int64_t> pick(0, p.valid_vocab - 1);
  std::uniform_real_distribution<double> grad(-c.grad_scale, c.grad_scale);
  for (std::int64_t i = 0; i < c.n; ++i) {
    std::int64_t t = pick(rng);
    if (c.ignore_rows && i % 5 == 2) t = p.ignore_index;
    p.targets.push_back(t);
    pr.g_values.push_back(static_cast<float>(grad(rng)));
    pr.h_values.push_back(static_cast<float>(grad(rng)));
    pr.e_values.push_back(static_cast<float>(grad(rng)));
    pr.g.push_back(c.upstream & kLogp ? pr.g_values.back() : 0.0f);
    pr.h.push_back(c.upstream & kLse ? pr.h_values.back() : 0.0f);
    pr.e.push_back(c.upstream & kEntropy ? pr.e_values.back() : 0.0f);
  }
  for (std::int64_t i = 128; c.quiet_rows && i < std::min<std::int64_t>(c.n, 256); ++i) {
    const auto k = static_cast<std::size_t>(i);
    pr.g_values[k] *= 1e-4f;
    pr.h_values[k] *= 1e-4f;
    pr.e_values[k] *= 1e-4f;
    pr.g[k] = c.upstream & kLogp ? pr.g_values[k] : 0.0f;
    pr.h[k] = c.upstream & kLse ? pr.h_values[k] : 0.0f;
    pr.e[k] = c.upstream & kEntropy ? pr.e_values[k] : 0.0f;
  }
  if (c.n > 1) p.targets[1] = p.valid_vocab - 1;  // the last valid column (tail tile)
  if (c.n > 0) p.targets[0] = 0;
  if (c.forbid_every > 0) {
    testing::forbid_tokens(p, *c.bias, b_bytes, c.forbid_every);
    if (c.n > 2) p.targets[2] = testing::kFirstForbidden;
  }
  for (std::int64_t v = 0; v < c.vocab; v += std::max<std::int64_t>(1, c.vocab / 300)) pr.sampled.push_back(v);
  // Also the last valid row, the last (maybe padding) row and a target's row; an ignored row's
  // target (-100) is no row at all.
  for (std::int64_t v : {p.valid_vocab - 1, c.vocab - 1, p.targets[std::min<std::int64_t>(2, c.n - 1)]}) {
    if (v < 0 || v >= c.vocab) continue;
    if (std::find(pr.sampled.begin(), pr.sampled.end(), v) == pr.sampled.end()) pr.sampled.push_back(v);
  }
  return pr;
}

struct Errors {
  double rel = 0, max_abs = 0;
};

// ||out - ref|| / ||ref|| and max |out - ref|; every value must be finite.
Errors compare(const std::vector<float>& out, const std::vector<double>& ref, const char* what) {
  Errors e;
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_TRUE(std::isfinite(out[i])) << what << "[" << i << "] not written or not finite";
    if (!std::isfinite(out[i])) return {INFINITY, INFINITY};
    const double d = out[i] - ref[i];
    err2 += d * d;
    ref2 += ref[i] * ref[i];
    e.max_abs = std::max(e.max_abs, std::abs(d));
  }
  e.rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return e;
}

// The forward of an op built with want_backward (which may keep the backward's first chunk, its
// partials merged beside the splits') against the fp64 reference, within the forward tests' bounds.
void expect_forward_matches(const testing::LogpProblem& p, const DeviceArray& logp, const DeviceArray& lse,
                            const DeviceArray* entropy) {
  const auto n = static_cast<std::size_t>(p.n);
  if (n == 0) return;
  const std::vector<float> got_logp = logp.to_vector<float>(n), got_lse = lse.to_vector<float>(n);
  const std::vector<float> got_entropy = entropy != nullptr ? entropy->to_vector<float>(n) : std::vector<float>{};
  std::vector<std::int64_t> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i] = static_cast<std::int64_t>(i);
  const std::vector<testing::LogpRow> ref = testing::reference_logp_rows(p, rows);
  for (std::size_t i = 0; i < n; ++i) {
    if (p.targets[i] == p.ignore_index) continue;
    if (ref[i].logp == -INFINITY) {
      EXPECT_LT(got_logp[i], testing::kForbiddenLogp) << "logp of row " << i << ", whose target is forbidden";
    } else {
      EXPECT_NEAR(got_logp[i], ref[i].logp, 2e-3) << "logp of row " << i;
    }
    EXPECT_NEAR(got_lse[i], ref[i].lse, 2e-3) << "lse of row " << i;
    if (entropy != nullptr) {
      EXPECT_NEAR(got_entropy[i], ref[i].entropy, 2e-3) << "entropy of row " << i;
    }
  }
}

struct Outcome {
  Errors dx, dw, db;
  bool repeatable = true;
  bool kept_differs = false;  // the gradients after a forward differ from the recomputed ones
  std::vector<std::uint8_t> after_forward;  // grad_hidden's bytes, then grad_weight's, after a forward
  std::string main_loop;
};

LinearLogpConfig config_for(const BwdCase& c) {
  LinearLogpConfig config = testing::logp_config(c);
  config.want_entropy = (c.upstream & kEntropy) != 0;
  config.want_backward = true;
  config.grad_weight_fp32 = c.grad_weight_fp32;
  config.dz_fp32 = c.dz_fp32;
  config.backward_workspace_bytes = c.workspace;
  config.grad_filter_threshold = c.filter;
  config.keep_logits_bytes = c.keep;
  return config;
}

// A case's inputs, as bytes and as values, and their fp64 gradients: built once for every run of
// the case, since the reference costs far more than a run.
struct PreparedCase {
  std::uint64_t seed = 0;
  std::vector<std::uint8_t> x_bytes, w_bytes, b_bytes;
  Problem pr;
};

PreparedCase prepare(const BwdCase& c, std::uint64_t seed) {
  PreparedCase d;
  d.seed = seed;
  d.pr = make_problem(c, seed, d.x_bytes, d.w_bytes, d.b_bytes);
  reference_gradients(d.pr);
  return d;
}

Outcome run_case(const BwdCase& c, const PreparedCase& d, Runtime& runtime = shared_runtime()) {
  const std::uint64_t seed = d.seed;
  const Problem& pr = d.pr;
  std::vector<std::uint8_t> r_bytes, rb_bytes;
  LinearLogp op(runtime, config_for(c));
  const DType wdt = c.grad_weight_fp32 ? DType::kFP32 : c.dtype;
  const DType bdt = c.grad_weight_fp32 || !c.bias ? DType::kFP32 : *c.bias;
  const std::size_t V = static_cast<std::size_t>(c.vocab), H = static_cast<std::size_t>(c.hidden);
  // Existing gradients to accumulate into (accumulate mode); the reference adds them.
  std::vector<float> r = testing::random_values(seed + 5, V * H, 0.05f, wdt, r_bytes);
  std::vector<float> rb = testing::random_values(seed + 6, V, 0.05f, bdt, rb_bytes);

  DeviceArray x(d.x_bytes.size()), w(d.w_bytes.size()), b(std::max<std::size_t>(d.b_bytes.size(), 16));
  x.upload(d.x_bytes.data(), d.x_bytes.size());
  w.upload(d.w_bytes.data(), d.w_bytes.size());
  b.upload(d.b_bytes.data(), d.b_bytes.size());
  std::vector<std::int32_t> t32(pr.p.targets.begin(), pr.p.targets.end());
  DeviceArray t = c.targets == DType::kInt32 ? DeviceArray::from(t32) : DeviceArray::from(pr.p.targets);
  DeviceArray g = DeviceArray::from(pr.g_values), h = DeviceArray::from(pr.h_values), ge = DeviceArray::from(pr.e_values);
  const std::size_t n4 = static_cast<std::size_t>(std::max<std::int64_t>(c.n, 1)) * 4;
  DeviceArray logp(n4), lse(n4), entropy(n4);
  DeviceArray gx(static_cast<std::size_t>(c.n) * H * dtype_size(c.dtype)), gw(V * H * dtype_size(wdt)),
      gb(V * dtype_size(bdt));

  LinearLogpInputs in;
  in.hidden = {x.data(), c.dtype, c.n, c.hidden, 0};
  in.weight = {w.data(), c.dtype, c.vocab, c.hidden, 0};
  if (c.bias) in.bias = {b.data(), *c.bias, c.vocab};
  in.targets = {t.data(), c.targets, c.n};
  LinearLogpGrads grads;
  grads.hidden = {gx.data(), c.dtype, c.n, c.hidden, 0};
  grads.weight = {gw.data(), wdt, c.vocab, c.hidden, 0};
  if (c.bias) grads.bias = {gb.data(), bdt, c.vocab};
  grads.accumulate = c.accumulate;
  LinearLogpBackwardInputs upstream;
  upstream.lse = {lse.data(), DType::kFP32, c.n};
  if (c.upstream & kLogp) upstream.grad_logp = {g.data(), DType::kFP32, c.n};
  if (c.upstream & kLse) upstream.grad_lse = {h.data(), DType::kFP32, c.n};
  if (c.upstream & kEntropy) {
    upstream.entropy = {entropy.data(), DType::kFP32, c.n};
    upstream.grad_entropy = {ge.data(), DType::kFP32, c.n};
  }
  const bool with_entropy = (c.upstream & kEntropy) != 0;

  // Runs 0 and 1 follow a forward of the same inputs, so a chunk the forward kept is used (and must
  // give the same bits both times); run 2 follows run 1's backward, which used the kept chunk up,
  // so it recomputes every chunk. Both kinds must match the reference.
  std::vector<std::uint8_t> first[3], recomputed[3];
  Outcome o;
  o.main_loop = op.main_loop();
  for (int run = 0; run < 3; ++run) {
    if (run < 2) op.forward(in, {{logp.data(), DType::kFP32, c.n}, {lse.data(), DType::kFP32, c.n}, upstream.entropy}, nullptr);
    if (run == 0) expect_forward_matches(pr.p, logp, lse, with_entropy ? &entropy : nullptr);
    gx.fill_bytes(0xff);
    if (c.accumulate) {
      gw.upload(r_bytes.data(), r_bytes.size());
      gb.upload(rb_bytes.data(), rb_bytes.size());
    } else {
      gw.fill_bytes(0xff);
      gb.fill_bytes(0xff);
    }
    op.backward(in, upstream, grads, nullptr);
    std::vector<std::uint8_t> got[3] = {gx.to_vector<std::uint8_t>(gx.bytes()), gw.to_vector<std::uint8_t>(gw.bytes()),
                                        gb.to_vector<std::uint8_t>(gb.bytes())};
    for (int k = 0; k < 3; ++k) {
      if (run == 0) first[k] = got[k];
      if (run == 1) o.repeatable = o.repeatable && got[k] == first[k];
      if (run == 2) recomputed[k] = got[k];
    }
  }
  EXPECT_EQ(op.check(nullptr).bad_rows, 0);
  for (int k = 0; k < 3; ++k) o.kept_differs = o.kept_differs || first[k] != recomputed[k];
  o.after_forward = first[0];
  o.after_forward.insert(o.after_forward.end(), first[1].begin(), first[1].end());

  std::vector<double> dx_ref = pr.dx;
  if (c.filter > 0 && c.quiet_rows) {
    // Every dZ tile of rows [128, 256) lies below the threshold: dropped, those rows get exactly
    // nothing. The other rows are unaffected.
    for (std::size_t k = 128 * H; k < std::min<std::size_t>(static_cast<std::size_t>(c.n), 256) * H; ++k) dx_ref[k] = 0.0;
  }
  std::vector<double> dw_ref = pr.dw;
  for (std::size_t s = 0; s < pr.sampled.size() && c.accumulate; ++s) {
    for (std::size_t k = 0; k < H; ++k) dw_ref[s * H + k] += r[static_cast<std::size_t>(pr.sampled[s]) * H + k];
  }
  std::vector<double> db_ref = pr.db;
  for (std::size_t v = 0; v < db_ref.size() && c.accumulate; ++v) db_ref[v] += rb[v];
  // The worse of the two kinds of run, field by field.
  auto worse = [](Errors& e, const Errors& other) {
    e.rel = std::max(e.rel, other.rel);
    e.max_abs = std::max(e.max_abs, other.max_abs);
  };
  for (const auto* run : {&first, &recomputed}) {
    const std::vector<float> dx = to_floats((*run)[0], c.dtype, static_cast<std::size_t>(c.n) * H);
    for (std::size_t k = 128 * H; c.filter > 0 && c.quiet_rows && k < std::min<std::size_t>(c.n, 256) * H; ++k) {
      EXPECT_EQ(dx[k], 0.0f) << "grad_hidden element " << k << " of a filtered tile";
    }
    worse(o.dx, compare(dx, dx_ref, "grad_hidden"));
    const std::vector<float> dw_all = to_floats((*run)[1], wdt, V * H);
    std::vector<float> dw;
    for (std::int64_t v : pr.sampled) {
      const auto row = dw_all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(v) * H);
      dw.insert(dw.end(), row, row + static_cast<std::ptrdiff_t>(H));
    }
    worse(o.dw, compare(dw, dw_ref, "grad_weight"));
    if (c.bias) worse(o.db, compare(to_floats((*run)[2], bdt, V), db_ref, "grad_bias"));
  }
  return o;
}

class LinearLogpBwdTest : public ::testing::TestWithParam<BwdCase> {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

std::uint64_t case_seed(const BwdCase& c) { return 2000 + static_cast<std::uint64_t>(c.n * 13 + c.vocab + c.hidden); }

// The case's outcome within its bounds; `label` names the runtime it ran in.
void expect_accurate(const BwdCase& c, const Outcome& o, const char* label) {
  std::printf("[ accuracy ] %-30s %s rel-norm dX %.2e dW %.2e db %.2e | max|d| dX %.2e dW %.2e db %.2e (%s%s)\n",
              c.name, dtype_name(c.dtype), o.dx.rel, o.dw.rel, o.db.rel, o.dx.max_abs, o.dw.max_abs, o.db.max_abs,
              o.main_loop.c_str(), label);
  // Bounded by the coarser of dZ's type and the output's.
  auto tolerance = [&](DType out) {
    auto of = [](DType d) { return d == DType::kFP32 ? 1e-4 : d == DType::kFP16 ? 4e-3 : 2e-2; };
    const DType dz = c.dz_fp32 ? DType::kFP32 : c.dtype;
    return c.tolerance > 0 ? c.tolerance : std::max(of(out), of(dz));
  };
  EXPECT_LT(o.dx.rel, tolerance(c.dtype)) << label;
  EXPECT_LT(o.dw.rel, tolerance(c.grad_weight_fp32 ? DType::kFP32 : c.dtype)) << label;
  EXPECT_LT(o.db.rel, tolerance(c.grad_weight_fp32 || !c.bias ? DType::kFP32 : *c.bias)) << label;
  EXPECT_TRUE(o.repeatable) << "two runs gave different bits" << label;
}

TEST_P(LinearLogpBwdTest, MatchesFp64Reference) {
  const BwdCase& c = GetParam();
  expect_accurate(c, run_case(c, prepare(c, case_seed(c))), "");
}

// The 16-bit cases of up to 1100 rows again with every forward in each tile of the rows as N
// (SHARDJIT_FWD_TILE). Where the backward is one chunk kept whole, that forward kernel keeps it
// itself (templates/linear_logp/fwd_column_keep.cuh), its maxima by tiles of 128 columns, and the
// backward after it must use it: its gradients differ from the recomputed ones and from those
// after a forward in 128 x 256 tiles, whose chunk the kept chunk's kernel keeps with maxima by 256
// columns (fp16's rounding, which 16-bit dZ hides at a few logits, so looked for from 100 000 on).
// Elsewhere the rows as N run past the kept chunks of fwd_keep.cuh (first_tile). The 256-column
// tiles have no keeping forward, nor the 168-row one with entropy (fwd_tile_keeps): in those the
// chunk kept whole is the kept chunk's kernel's, as after a forward in 128 x 256 tiles, bit for
// bit. A relative norm would hide a few wrong columns of a kept chunk, so the keeping forward's
// largest error is also held to a few times that of the run in 128 x 256 tiles (their roundings
// differ, their scale does not).
TEST_P(LinearLogpBwdTest, MatchesFp64ReferenceWithTheForwardInTilesOfTheRowsAsN) {
  const BwdCase& c = GetParam();
  if (c.dtype == DType::kFP32 || c.n > 1100) GTEST_SKIP() << "the 16-bit cases of up to 1100 rows";
  if (shared_runtime().impl().device(0).arch() != "sm_90a" || !shared_runtime().impl().config.hopper_path) {
    GTEST_SKIP() << "the rows as N are the Hopper loop's";
  }
  const bool keeps_whole = !c.dz_fp32 && c.filter == 0 && c.workspace == 0 && c.keep == 0 && c.n * c.vocab >= 100000;
  const PreparedCase prepared = prepare(c, case_seed(c));
  Outcome wide;
  if (keeps_whole) {
    const std::string name = fwd_tile_name(FwdTile{128, 256, 64, 4, true, false});
    wide = run_case(c, prepared, testing::runtime_with("SHARDJIT_FWD_TILE", name));
  }
  // The largest error of a run after a keeping forward: within a few times the wide run's, plus a
  // floor of the dtype's rounding at the gradients' scale where the wide run's is exact.
  auto expect_max_near_wide = [&](const Outcome& o, const std::string& label) {
    const double floor = (c.dtype == DType::kFP16 ? 1e-3 : 8e-3) * c.grad_scale;
    EXPECT_LE(o.dx.max_abs, 4 * wide.dx.max_abs + floor) << "grad_hidden" << label;
    EXPECT_LE(o.dw.max_abs, 4 * wide.dw.max_abs + floor) << "grad_weight" << label;
    EXPECT_LE(o.db.max_abs, 4 * wide.db.max_abs + floor) << "grad_bias" << label;
  };
  std::vector<FwdTile> tiles;
  for (const int bm : kFwdRowsAsNRows) tiles.push_back(FwdTile{bm, 128, 64, fwd_rows_as_n_stages(128), true, true});
  tiles.push_back(FwdTile{152, 256, 64, fwd_rows_as_n_stages(256), true, true});
  const bool entropy = (c.upstream & kEntropy) != 0;
  for (const FwdTile& tile : tiles) {
    const std::string label = ", tile " + fwd_tile_name(tile);
    const Outcome o = run_case(c, prepared, testing::runtime_with("SHARDJIT_FWD_TILE", fwd_tile_name(tile)));
    expect_accurate(c, o, label.c_str());
    if (!keeps_whole) continue;
    EXPECT_TRUE(o.kept_differs) << "no kept chunk was used" << label;
    if (fwd_tile_keeps(tile, entropy)) {
      EXPECT_NE(o.after_forward, wide.after_forward) << "the chunk was kept in 128 x 256 tiles" << label;
      expect_max_near_wide(o, label);
    } else {
      EXPECT_EQ(o.after_forward, wide.after_forward) << "the chunk was not the kept chunk's kernel's" << label;
    }
  }
}

constexpr std::optional<DType> kNoBias = std::nullopt;

const BwdCase kCases[] = {
    {"n1_h64_v300", 1, 64, 300},
    // Fewer rows than a tile: grad_hidden reads dZ's rows in place in short boxes (tail_box_rows),
    // its stages' other rows stale. One chunk at a TP8 shard's shape; several chunks, the fp32
    // accumulator their addend, at 33 rows and at 65 (the second warpgroup's first row).
    {"n7_h4096_v16032_short_a_box", 7, 4096, 16032, 0, DType::kBF16, kNoBias, DType::kInt64, 1.0f, kBoth},
    {"n33_h1000_v20000_short_a_box_chunks_fp16", 33, 1000, 20000, 0, DType::kFP16, DType::kFP16, DType::kInt32, 1.0f,
     kBoth, true, false, false, false, 33 * 2 * 5120},
    {"n65_h512_v5000_short_a_box_chunks", 65, 512, 5000, 4990, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f, kAll,
     false, false, false, false, 65 * 2 * 1024},
    // A sweep head's odd shape: gemma2's hidden 2304, an odd vocabulary, 333 rows, every output's
    // gradient, ignored rows.
    {"n333_h2304_v4099_odd", 333, 2304, 4099, 0, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f, kAll, true},
    {"n129_h64_v300_logp_bias_temp", 129, 64, 300, 0, DType::kFP16, DType::kFP16, DType::kInt32, 0.7f, kLogp},
    {"n129_h72_v300_lse_ignore", 129, 72, 300, 0, DType::kFP32, DType::kFP32, DType::kInt64, 1.0f, kLse, true},
    {"n1000_h512_v300_pad", 1000, 512, 300, 290, DType::kBF16, DType::kBF16, DType::kInt32, 1.0f, kBoth, true},
    {"n1000_h64_v50257", 1000, 64, 50257, 0, DType::kBF16, DType::kFP32, DType::kInt64, 1.3f, kBoth, true},
    {"n129_h256_v50257_w32", 129, 256, 50257, 0, DType::kFP16, kNoBias, DType::kInt64, 1.0f, kBoth, false, false, true},
    {"n1000_h64_v50257_fp32", 1000, 64, 50257, 0, DType::kFP32, DType::kBF16, DType::kInt64, 1.0f, kLogp},
    {"n129_h64_v50257_pad_chunks_acc", 129, 64, 50257, 50000, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth,
     true, true, false, false, 129 * 128 * 2 * 40},
    {"n1000_h136_v300_chunks_acc_fp32", 1000, 136, 300, 0, DType::kFP32, DType::kFP32, DType::kInt64, 0.5f, kBoth, true,
     true, false, false, 1000 * 128 * 4},
    {"n1000_h64_v50257_3chunks_fp16", 1000, 64, 50257, 0, DType::kFP16, kNoBias, DType::kInt32, 1.0f, kLse, false, false,
     false, false, 1000 * 2 * 17024},
    // Chunks with bias, a temperature, ignored rows and padding columns: the first chunk, kept by
    // the forward on the Hopper loop, with all of them.
    {"n300_h128_v20000_pad_chunks_bias_temp", 300, 128, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 0.8f,
     kBoth, true, false, false, false, 300 * 2 * 2560},
    // Two chunks kept by the forward on the Hopper loop, the second in the accumulator's memory
    // (BackwardChunks::kept_band_rows): chunks of H columns, whose first grad_hidden product runs
    // in two bands on an H200 (4224 and 276 rows), with bias, a temperature, ignored rows and
    // padding columns; and chunks of 2 H columns, one band, fp16 with grad_weight accumulated.
    {"n4500_h1024_v2548_two_kept_bands", 4500, 1024, 2548, 2540, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f,
     kBoth, true, false, false, false, 4500 * 2 * 1024},
    {"n1000_h128_v1000_two_kept_2h_fp16", 1000, 128, 1000, 990, DType::kFP16, DType::kFP16, DType::kInt32, 1.2f, kLogp,
     true, true, false, false, 1000 * 2 * 256},
    // A keep budget: chunks of 2 H columns (ten, the last 392 wide), the first two kept in place and
    // five more in the keep buffer, on odd rows with bias, a temperature, ignored rows and padding
    // columns; and a budget of eight more, nine of ten kept (one left to recompute; the whole
    // shard would need 10 240 000 bytes), fp16 with grad_weight accumulated.
    {"n1001_h256_v5000_keep_budget_7", 1001, 256, 5000, 4990, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f, kBoth,
     true, false, false, false, 1001 * 2 * 512, 1.0, 0, 0, false, 1001 * 512 * 2 * 5},
    {"n1000_h256_v5000_keep_all_fp16", 1000, 256, 5000, 0, DType::kFP16, DType::kFP16, DType::kInt32, 1.2f, kLogp, true,
     true, false, false, 1000 * 2 * 512, 1.0, 0, 0, false, 1000 * 512 * 2 * 8},
    // A keep budget where the accumulator cannot hold the second chunk (chunks of 2560 columns,
    // wider than 2 H): the first kept in the dZ buffer, the next three in the keep buffer, with
    // bias, a temperature, ignored rows, padding columns and every output's gradient; fp16 with
    // grad_weight accumulated and a budget of six more, all but the last of eight chunks; and dZ
    // and keep budgets that hold the whole shard together, which is then one chunk, kept whole.
    {"n300_h128_v20000_keep_from_second", 300, 128, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 0.8f,
     kAll, true, false, false, false, 300 * 2 * 2560, 1.0, 0, 0, false, 300 * 2560 * 2 * 3},
    {"n301_h128_v20000_keep_all_wide_fp16", 301, 128, 20000, 0, DType::kFP16, DType::kFP16, DType::kInt32, 1.1f, kLogp,
     true, true, false, false, 301 * 2 * 2560, 1.0, 0, 0, false, 301 * 2560 * 2 * 6},
    {"n300_h128_v20000_whole_in_both_budgets", 300, 128, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 0.8f,
     kAll, true, false, false, false, 300 * 2 * 2560, 1.0, 0, 0, false, 300 * 20096 * 2},
    // Forbidden tokens (bias -inf: a logit mask folded into the bias, testing::forbid_tokens: spaced
    // and in runs of whole tiles), every output's gradient, row 2's target among them, at
    // temperatures where an inexact floor gave a whole forbidden tile a term of +inf: chunks of 2560
    // columns, the first kept by the forward on the Hopper loop (fp16 z - m, where a forbidden
    // token's is -inf) and holding the run [256, 768), with ignored rows and padding columns; the
    // whole shard one kept chunk (runs 0 and 1) or recomputed in the Hopper loop's dZ epilogue (run
    // 2), fp16; and the fp32 loop's.
    {"n300_h128_v20000_forbidden_tokens_kept", 300, 128, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 1.2f,
     kAll, true, false, false, false, 300 * 2 * 2560, 1.0, 0, 0, false, 0, 7},
    {"n200_h256_v5000_forbidden_tokens_fp16", 200, 256, 5000, 0, DType::kFP16, DType::kFP16, DType::kInt32, 1.0f, kAll,
     false, false, false, false, 0, 1.0, 0, 0, false, 0, 3},
    // And the whole shard one chunk, which a forward of the rows as N keeps itself
    // (fwd_column_keep.cuh), at a temperature below 1 with an fp32 bias, ignored rows and every
    // output's gradient.
    {"n257_h192_v6007_forbidden_tokens_cool", 257, 192, 6007, 0, DType::kBF16, DType::kFP32, DType::kInt64, 0.7f, kAll,
     true, false, false, false, 0, 1.0, 0, 0, false, 0, 4},
    {"n129_h72_v3001_forbidden_tokens_fp32", 129, 72, 3001, 0, DType::kFP32, DType::kFP32, DType::kInt64, 2.0f, kAll,
     false, false, false, false, 0, 1.0, 0, 0, false, 0, 5},
    {"n129_h64_v300_dz_fp32", 129, 64, 300, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth, false, false, true,
     true, 0, 1.0, 1e-2},
    {"n1_h200_v50257_fp16", 1, 200, 50257, 0, DType::kFP16, kNoBias, DType::kInt64, 1.0f, kLogp},
    // Unscaled, dZ of these would sink into fp16's subnormals (about 3e-6) or overflow it (3e5).
    {"n1000_h64_v300_small_grads_fp16", 1000, 64, 300, 0, DType::kFP16, DType::kFP16, DType::kInt64, 1.0f, kBoth, false,
     false, true, false, 0, 1e-3},
    {"n129_h1024_v300_huge_grads_fp16", 129, 1024, 300, 0, DType::kFP16, kNoBias, DType::kInt64, 1.0f, kBoth, false, false,
     true, false, 0, 1e5},
    {"n1000_h64_v50257_acc_fp32w", 1000, 64, 50257, 0, DType::kBF16, DType::kFP16, DType::kInt64, 1.0f, kLogp, false, true,
     true},
    {"n1000_h64_v300_filter", 1000, 64, 300, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth, true, false, false,
     false, 0, 1.0, 0, 1e-3f, true},
    {"n1000_h64_v300_filter_fp32", 1000, 64, 300, 0, DType::kFP32, kNoBias, DType::kInt64, 1.0f, kBoth, false, false, false,
     false, 0, 1.0, 1e-3, 1e-3f, true},
    // More tiles than a GPU of up to 132 multiprocessors runs at once in every kernel but
    // grad_weight's (dZ 266, grad_hidden 133): the filter mask of later waves' tiles.
    // Grids that fill at most half of an H200's 132 multiprocessors, split along K by the Hopper
    // kernels (templates/common/stream_k.cuh): dZ's 54 tiles of 16 slices, grad_weight's 48 of
    // 18 and grad_hidden's 36 of 24, each tile in two to four pieces.
    {"n1100_h1024_v1500_split_k", 1100, 1024, 1500, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth, false,
     true},
    // Grids with a mostly empty last wave on an H200's 132 multiprocessors: a full wave kept whole,
    // the last wave's tiles split among the blocks. dZ (recomputed on the third run) 48 x 3 = 144
    // tiles of 16 slices, 12 split among 24 blocks; grad_hidden 48 x 4 = 192 of 11, 60 among 82;
    // grad_weight 24 tiles, all split. Then the same in two chunks of 768 and 632 columns, with
    // every output's gradient: grad_hidden's last chunk adds the accumulator, through the ring in
    // its whole tiles and from memory in its split ones. And two full waves: grad_hidden's 68 x 4 =
    // 272 tiles, 264 whole (two a block), 8 of 11 slices split among 11 blocks. And tiles of more
    // K slices than the GEMM walks persistently (41): grad_hidden's 192 tiles, 60 split among 132
    // blocks, which a plan without the split launches one a tile.
    {"n6100_h1024_v700_split_last_wave", 6100, 1024, 700, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth,
     false, true},
    {"n6100_h1024_v1400_chunks_split_last_wave_fp16", 6100, 1024, 1400, 1390, DType::kFP16, kNoBias, DType::kInt32,
     1.1f, kAll, true, false, false, false, 6100 * 2 * 768},
    {"n8600_h1024_v700_two_waves_split", 8600, 1024, 700, 0, DType::kBF16, kNoBias, DType::kInt64, 1.0f, kLogp},
    {"n6100_h1024_v2600_split_last_wave_long_k", 6100, 1024, 2600, 0, DType::kBF16, kNoBias, DType::kInt64, 1.0f,
     kBoth},
    // Unsplit GEMMs whose addend comes into the TMA ring (templates/gemm/gemm_staged_addend.cuh)
    // on an H100 or H200: grad_weight += (bf16) and the last chunk's grad_hidden from the fp32
    // accumulator, 108 tiles of 35 and 36 K slices each, one a block (126 workers in pairs would
    // not be a third more: cluster_stream_k); two chunks of 2304 columns.
    {"n2200_h1536_v4600_chunks_acc_staged", 2200, 1536, 4600, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f,
     kBoth, false, true, false, false, 2200 * 2 * 2304},
    // The same at H = 1024: 72 tiles, below a wave, split whole over 126 blocks in clusters of two
    // row tiles of 18, each pair at one run of its two (cluster_stream_k); the split tiles' pieces
    // read the addends from global memory.
    {"n2200_h1024_v4600_chunks_acc_clusters_of_two", 2200, 1024, 4600, 0, DType::kBF16, DType::kBF16, DType::kInt64,
     1.0f, kBoth, false, true, false, false, 2200 * 2 * 2304},
    // fp16 operands through the TMA GEMMs, one tile a block, on odd row-tile counts: grad_hidden's
    // 17 and grad_weight's 35, whose addend (grad_weight +=, fp16) comes through the ring.
    {"n2100_h1024_v4400_odd_row_tiles_fp16", 2100, 1024, 4400, 0, DType::kFP16, kNoBias, DType::kInt32, 1.0f, kBoth,
     false, true},
    // Split plans whose runs hold whole tiles, so that their addends come through the ring
    // (stream_k_whole): on an H200 grad_weight's 10 tiles of 2 slices in two runs, grad_hidden's 2
    // of 10, dZ's 3 of 8.
    {"n100_h512_v600_split_whole_acc", 100, 512, 600, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth, false,
     true},
    // grad_hidden split whole over five row tiles (5 x 4 tiles of 94 slices), in clusters of five
    // blocks sharing W's slices (cluster_stream_k); 129 rows (two) and 300-333 rows (three)
    // cluster too, above; 1000 rows at H = 64 (eight row tiles) do not.
    {"n600_h1024_v6000_clusters_of_five", 600, 1024, 6000, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kBoth},
    // grad_hidden below a wave at 1000 rows of H = 2304 (8 x 9 = 72 tiles, the whole shard one
    // chunk): split whole over 128 blocks in clusters of two row tiles of the eight.
    {"n1000_h2304_v2000_below_a_wave_in_pairs", 1000, 2304, 2000, 0, DType::kBF16, kNoBias, DType::kInt64, 1.0f,
     kBoth},
    {"n17000_h256_v300_filter_waves", 17000, 256, 300, 0, DType::kBF16, kNoBias, DType::kInt64, 1.0f, kBoth, false,
     false, false, false, 0, 1.0, 0, 1e-3f, true},
    // The entropy's gradient, alone and with the others, in every dtype, on odd shapes, through
    // the portable and Hopper dZ kernels, the kept chunks (one, and two with bands), the scale
    // kernel at gradient sizes where the entropy term alone sets dZ's range, and the filter.
    {"n129_h72_v300_entropy_fp32", 129, 72, 300, 0, DType::kFP32, DType::kFP32, DType::kInt64, 0.7f, kEntropy, true},
    {"n1000_h64_v50257_entropy_bf16", 1000, 64, 50257, 0, DType::kBF16, kNoBias, DType::kInt32, 1.0f, kEntropy},
    {"n129_h64_v300_pad_all_fp16", 129, 64, 300, 290, DType::kFP16, DType::kFP16, DType::kInt32, 1.3f, kAll, true},
    {"n1_h200_v50257_lse_entropy_fp16", 1, 200, 50257, 0, DType::kFP16, kNoBias, DType::kInt64, 1.0f, kLse | kEntropy},
    // One chunk kept whole whose last two column tiles lie wholly in the padding (valid 4500 of
    // 5000 rows: tiles from column 4608 on), with ignored rows and every output's gradient.
    {"n200_h128_v5000_pad_tiles_kept_whole", 200, 128, 5000, 4500, DType::kBF16, DType::kBF16, DType::kInt64, 0.9f,
     kAll, true},
    {"n1000_h136_v300_chunks_all_fp32", 1000, 136, 300, 0, DType::kFP32, DType::kFP32, DType::kInt64, 0.5f, kAll, true,
     true, false, false, 1000 * 128 * 4},
    {"n300_h128_v20000_pad_chunks_kept_all", 300, 128, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 0.8f,
     kAll, true, false, false, false, 300 * 2 * 2560},
    // Half the shard padding: its last chunks hold no valid columns, so grad_hidden's product there
    // has no K slices (B without rows of data) and, on the tiles of the rows as N (2 x 160 rows),
    // must still write the accumulator's sums (the last chunk) or keep them.
    {"n300_h128_v20000_half_padded_chunks_acc", 300, 128, 20000, 10000, DType::kBF16, DType::kBF16, DType::kInt64,
     1.0f, kBoth, false, true, false, false, 300 * 2 * 2560},
    {"n4500_h1024_v2548_two_kept_bands_entropy", 4500, 1024, 2548, 2540, DType::kBF16, kNoBias, DType::kInt64, 1.0f,
     kEntropy, true, false, false, false, 4500 * 2 * 1024},
    {"n1000_h128_v1000_two_kept_logp_entropy_fp16", 1000, 128, 1000, 990, DType::kFP16, DType::kFP16, DType::kInt32, 1.2f,
     kLogp | kEntropy, true, true, false, false, 1000 * 2 * 256, 1.0, 1e-2},
    {"n129_h64_v300_dz_fp32_all", 129, 64, 300, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kAll, false, false,
     true, true, 0, 1.0, 1e-2},
    // Without the entropy term in the scale's bound, dZ of these overflows fp16 (up to ~6e5) or
    // sinks into its subnormals.
    {"n129_h1024_v300_huge_entropy_grads_fp16", 129, 1024, 300, 0, DType::kFP16, kNoBias, DType::kInt64, 1.0f, kEntropy,
     false, false, true, false, 0, 1e5},
    {"n1000_h64_v300_small_entropy_grads_fp16", 1000, 64, 300, 0, DType::kFP16, DType::kFP16, DType::kInt64, 1.0f,
     kEntropy, false, false, true, false, 0, 1e-3},
    {"n1000_h64_v300_filter_all", 1000, 64, 300, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kAll, true, false,
     false, false, 0, 1.0, 0, 1e-3f, true},
    {"n1100_h1024_v1500_split_k_all", 1100, 1024, 1500, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, kAll, false,
     true},
};

INSTANTIATE_TEST_SUITE_P(Shapes, LinearLogpBwdTest, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

class LinearLogpBwdDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

// A small bf16 op (H = 64, V = 300) and its buffers, for the error and edge cases.
struct Small {
  explicit Small(std::int64_t rows, LinearLogpConfig config = base_config())
      : n(rows), op(shared_runtime(), config), x(16 + rows * 64 * 2), w(300 * 64 * 2), t(16 + rows * 8),
        lse(16 + rows * 4), g(16 + rows * 4), gx(16 + rows * 64 * 2), gw(300 * 64 * 4), gb(300 * 4) {
    std::vector<std::uint8_t> x_bytes, w_bytes;
    testing::random_values(11, static_cast<std::size_t>(rows * 64), 1.0f, DType::kBF16, x_bytes);
    testing::random_values(12, 300 * 64, 0.5f, DType::kBF16, w_bytes);
    x.upload(x_bytes.data(), x_bytes.size());
    w.upload(w_bytes.data(), w_bytes.size());
    std::vector<float> ones(static_cast<std::size_t>(rows), 1.0f);
    g.upload(ones.data(), ones.size() * 4);
  }
  static LinearLogpConfig base_config() {
    LinearLogpConfig c;
    c.hidden = 64;
    c.vocab_local = 300;
    c.want_backward = true;
    return c;
  }
  LinearLogpInputs inputs() const {
    return {{x.data(), DType::kBF16, n, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {}, {t.data(), DType::kInt64, n}};
  }
  LinearLogpGrads grads(DType weight_dtype = DType::kBF16) const {
    LinearLogpGrads out;
    out.hidden = {gx.data(), DType::kBF16, n, 64, 0};
    out.weight = {gw.data(), weight_dtype, 300, 64, 0};
    return out;
  }
  void backward(const LinearLogpGrads& out) {
    op.backward(inputs(), {lse.data(), DType::kFP32, n}, {g.data(), DType::kFP32, n}, {}, out, nullptr);
  }
  std::int64_t n;
  LinearLogp op;
  DeviceArray x, w, t, lse, g, gx, gw, gb;
};

void expect_invalid(const std::function<void()>& call, const std::string& needle) {
  try {
    call();
    FAIL() << "expected an error naming " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(LinearLogpBwdDeviceTest, OpWithoutWantBackwardRefuses) {
  LinearLogpConfig config = Small::base_config();
  config.want_backward = false;
  Small s(4, config);
  expect_invalid([&] { s.backward(s.grads()); }, "want_backward");
}

TEST_F(LinearLogpBwdDeviceTest, BadViewsAreClearErrors) {
  LinearLogpConfig config = Small::base_config();
  config.grad_weight_fp32 = true;
  Small s(4, config);
  expect_invalid([&] { s.backward(s.grads(DType::kBF16)); }, "grad_weight");
  LinearLogpGrads with_bias = s.grads(DType::kFP32);
  with_bias.bias = {s.gb.data(), DType::kFP32, 300};
  expect_invalid([&] { s.backward(with_bias); }, "grad_bias");
  expect_invalid([&] {
    s.op.backward(s.inputs(), {}, {s.g.data(), DType::kFP32, 4}, {}, s.grads(DType::kFP32), nullptr);
  }, "lse");
  LinearLogpGrads short_hidden = s.grads(DType::kFP32);
  short_hidden.hidden.rows = 3;
  expect_invalid([&] { s.backward(short_hidden); }, "grad_hidden");
}

TEST_F(LinearLogpBwdDeviceTest, AnEntropyGradientNeedsTheForwardsEntropy) {
  DeviceArray entropy(16 * 4), grad_entropy(16 * 4);
  auto backward = [](Small& s, const DeviceArray* h, const DeviceArray* e) {
    LinearLogpBackwardInputs b;
    b.lse = {s.lse.data(), DType::kFP32, s.n};
    b.grad_logp = {s.g.data(), DType::kFP32, s.n};
    if (h != nullptr) b.entropy = {h->data(), DType::kFP32, s.n};
    if (e != nullptr) b.grad_entropy = {e->data(), DType::kFP32, s.n};
    s.op.backward(s.inputs(), b, s.grads(), nullptr);
  };
  Small plain(4);
  expect_invalid([&] { backward(plain, &entropy, &grad_entropy); }, "want_entropy");
  EXPECT_NO_THROW(backward(plain, &entropy, nullptr)) << "entropy without its gradient is not read";
  LinearLogpConfig config = Small::base_config();
  config.want_entropy = true;
  Small with_entropy(4, config);
  expect_invalid([&] { backward(with_entropy, nullptr, &grad_entropy); }, "entropy");
  LinearLogpBackwardInputs short_entropy;
  short_entropy.lse = {with_entropy.lse.data(), DType::kFP32, 4};
  short_entropy.entropy = {entropy.data(), DType::kFP32, 3};
  short_entropy.grad_entropy = {grad_entropy.data(), DType::kFP32, 4};
  expect_invalid([&] { with_entropy.op.backward(with_entropy.inputs(), short_entropy, with_entropy.grads(), nullptr); },
                 "entropy");
  // A gradient written over grad_entropy, which the kernels read while they write.
  DeviceArray shared(4 * 64 * 2);
  LinearLogpGrads over_input;
  over_input.hidden = {shared.data(), DType::kBF16, 4, 64, 0};
  short_entropy.entropy.size = 4;
  short_entropy.grad_entropy.data = shared.data();
  expect_invalid([&] { with_entropy.op.backward(with_entropy.inputs(), short_entropy, over_input, nullptr); },
                 "grad_entropy");
}

// reduce_hidden only concerns tensor parallelism: on one GPU the gradients are the same bits.
TEST_F(LinearLogpBwdDeviceTest, ReduceHiddenChangesNothingOnOneGpu) {
  Small s(40);
  std::vector<std::int64_t> targets(40);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int64_t>(i * 7 % 300);
  s.t.upload(targets.data(), targets.size() * 8);
  DeviceArray logp(40 * 4);
  std::vector<std::uint8_t> bits[2];
  for (int reduce = 0; reduce < 2; ++reduce) {
    // A forward before each: both backwards use the logits it kept (one recomputing them would
    // round differently).
    s.op.forward(s.inputs(), {{logp.data(), DType::kFP32, 40}, {s.lse.data(), DType::kFP32, 40}, {}}, nullptr);
    LinearLogpGrads grads = s.grads();
    grads.reduce_hidden = reduce == 1;
    s.gx.fill_bytes(0xff);
    s.backward(grads);
    bits[reduce] = s.gx.to_vector<std::uint8_t>(40 * 64 * 2);
  }
  EXPECT_EQ(bits[0], bits[1]);
}

// The entropy's gradient through a tensor-parallel op of one rank, which runs the TP backward
// (grad_hidden accumulated in fp32, all-reduced over its one rank, rounded) with
// reduce_grad_hidden, and the single-GPU steps without it: both give the reference gradients.
TEST_F(LinearLogpBwdDeviceTest, OneRankTensorParallelTakesTheEntropyGradient) {
  const BwdCase c{"tp1", 300, 128, 5000, 4990, DType::kBF16, DType::kBF16, DType::kInt64, 0.8f, kAll, true, false,
                  true, false, 300 * 2 * 1024};
  std::vector<std::uint8_t> x_bytes, w_bytes, b_bytes;
  Problem pr = make_problem(c, 77, x_bytes, w_bytes, b_bytes);
  reference_gradients(pr);
  Communicator comm = Communicator::create(shared_runtime(), 0, 0, 1, Communicator::new_unique_id());
  LinearLogp op(shared_runtime(), config_for(c), comm);
  DeviceArray x(x_bytes.size()), w(w_bytes.size()), b(b_bytes.size());
  x.upload(x_bytes.data(), x_bytes.size());
  w.upload(w_bytes.data(), w_bytes.size());
  b.upload(b_bytes.data(), b_bytes.size());
  DeviceArray t = DeviceArray::from(pr.p.targets), g = DeviceArray::from(pr.g_values),
              h = DeviceArray::from(pr.h_values), e = DeviceArray::from(pr.e_values);
  DeviceArray logp(300 * 4), lse(300 * 4), entropy(300 * 4), gx(300 * 128 * 2), gw(5000 * 128 * 4);
  const LinearLogpInputs in{{x.data(), DType::kBF16, 300, 128, 0},
                            {w.data(), DType::kBF16, 5000, 128, 0},
                            {b.data(), DType::kBF16, 5000},
                            {t.data(), DType::kInt64, 300}};
  op.forward(in, {{logp.data(), DType::kFP32, 300}, {lse.data(), DType::kFP32, 300}, {entropy.data(), DType::kFP32, 300}},
             nullptr);
  expect_forward_matches(pr.p, logp, lse, &entropy);
  const LinearLogpBackwardInputs upstream{{lse.data(), DType::kFP32, 300},
                                          {entropy.data(), DType::kFP32, 300},
                                          {g.data(), DType::kFP32, 300},
                                          {h.data(), DType::kFP32, 300},
                                          {e.data(), DType::kFP32, 300}};
  for (const bool reduce : {true, false}) {
    SCOPED_TRACE(reduce ? "reduce_hidden" : "this rank's partial");
    LinearLogpGrads grads;
    grads.hidden = {gx.data(), DType::kBF16, 300, 128, 0};
    grads.weight = {gw.data(), DType::kFP32, 5000, 128, 0};
    grads.reduce_hidden = reduce;
    gx.fill_bytes(0xff);
    gw.fill_bytes(0xff);
    op.backward(in, upstream, grads, nullptr);
    EXPECT_EQ(op.check(nullptr).bad_rows, 0);
    EXPECT_LT(compare(to_floats(gx.to_vector<std::uint8_t>(gx.bytes()), DType::kBF16, 300 * 128), pr.dx, "grad_hidden").rel,
              2e-2);
    const std::vector<float> dw_all = gw.to_vector<float>(5000 * 128);
    std::vector<float> dw;
    for (std::int64_t v : pr.sampled) {
      dw.insert(dw.end(), dw_all.begin() + v * 128, dw_all.begin() + (v + 1) * 128);
    }
    EXPECT_LT(compare(dw, pr.dw, "grad_weight").rel, 2e-2);
  }
}

TEST_F(LinearLogpBwdDeviceTest, TooSmallAWorkspaceIsAClearError) {
  LinearLogpConfig config = Small::base_config();
  config.backward_workspace_bytes = 1000;
  config.keep_logits_bytes = 0;  // else an op that keeps chunks holds the whole shard in both budgets
  Small s(64, config);
  expect_invalid([&] { s.backward(s.grads()); }, "backward_workspace_bytes");
  // The forward of the same op keeps no chunk for such rows, and runs.
  DeviceArray logp(64 * 4);
  EXPECT_NO_THROW(
      s.op.forward(s.inputs(), {{logp.data(), DType::kFP32, 64}, {s.lse.data(), DType::kFP32, 64}, {}}, nullptr));
}

// Rows of a short box's stage past the box hold what shared memory held before: here a backward
// of 300 rows whose rows 8 on are NaN, so that their dZ fills the GEMM's A stages with NaN. A
// backward of 7 rows (one tile, in boxes of 8 rows), of 136 (a last tile of 8 rows) or of 249 (121
// rows in a whole box) after it must give the same bits as before it.
TEST_F(LinearLogpBwdDeviceTest, StaleRowsOfShortBoxesNeverReachTheGradients) {
  const std::int64_t big = 300;
  Small poisoned(big);
  std::vector<std::uint16_t> x_bits = poisoned.x.to_vector<std::uint16_t>(static_cast<std::size_t>(big * 64));
  for (std::size_t i = 8 * 64; i < x_bits.size(); ++i) x_bits[i] = 0x7fc0;  // bf16 NaN
  poisoned.x.upload(x_bits.data(), x_bits.size() * 2);
  std::vector<std::int64_t> targets(static_cast<std::size_t>(big));
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int64_t>(i * 11 % 300);
  poisoned.t.upload(targets.data(), targets.size() * 8);
  DeviceArray logp(static_cast<std::size_t>(big * 4));
  for (const std::int64_t rows : {7, 136, 249}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    Small small(rows);
    small.t.upload(targets.data(), static_cast<std::size_t>(rows * 8));
    auto run_small = [&] {
      small.op.forward(small.inputs(),
                       {{logp.data(), DType::kFP32, rows}, {small.lse.data(), DType::kFP32, rows}, {}}, nullptr);
      small.gx.fill_bytes(0xff);
      small.gw.fill_bytes(0xff);
      small.backward(small.grads());
      return std::pair{small.gx.to_vector<std::uint16_t>(static_cast<std::size_t>(rows * 64)),
                       small.gw.to_vector<std::uint16_t>(300 * 64)};
    };
    const auto before = run_small();
    for (std::uint16_t bits : before.first) ASSERT_NE(bits & 0x7f80, 0x7f80) << "grad_hidden not finite";
    poisoned.op.forward(poisoned.inputs(),
                        {{logp.data(), DType::kFP32, big}, {poisoned.lse.data(), DType::kFP32, big}, {}}, nullptr);
    poisoned.backward(poisoned.grads());
    const auto after = run_small();
    EXPECT_EQ(after.first, before.first) << "grad_hidden changed after the NaN rows";
    EXPECT_EQ(after.second, before.second) << "grad_weight changed after the NaN rows";
  }
}

TEST_F(LinearLogpBwdDeviceTest, ZeroRowsGiveZeroParameterGradients) {
  LinearLogpConfig config = Small::base_config();
  config.grad_weight_fp32 = true;
  Small s(0, config);
  s.gw.fill_bytes(0xff);
  s.op.backward({{nullptr, DType::kBF16, 0, 64, 0}, {s.w.data(), DType::kBF16, 300, 64, 0}, {}, {nullptr, DType::kInt64, 0}},
                {nullptr, DType::kFP32, 0}, {}, {}, {{}, {s.gw.data(), DType::kFP32, 300, 64, 0}, {}, false}, nullptr);
  for (float v : s.gw.to_vector<float>(300 * 64)) ASSERT_EQ(v, 0.0f);
}

TEST_F(LinearLogpBwdDeviceTest, BadAndIgnoredTargetsGetNoGradientAndNullGradsAreLeftAlone) {
  Small s(6);
  const std::vector<std::int64_t> targets = {5, 300, -100, -7, 299, 1000};
  s.t.upload(targets.data(), targets.size() * 8);
  DeviceArray logp(6 * 4);
  s.op.forward(s.inputs(), {{logp.data(), DType::kFP32, 6}, {s.lse.data(), DType::kFP32, 6}, {}}, nullptr);
  s.gx.fill_bytes(0xff);
  s.gw.fill_bytes(0x5a);
  LinearLogpGrads only_hidden;
  only_hidden.hidden = {s.gx.data(), DType::kBF16, 6, 64, 0};
  s.backward(only_hidden);
  auto gx = s.gx.to_vector<std::uint16_t>(6 * 64);
  for (int row = 0; row < 6; ++row) {
    bool zero = true;
    for (int k = 0; k < 64; ++k) {
      const float v = testing::bf16_to_float(gx[static_cast<std::size_t>(row * 64 + k)]);
      ASSERT_TRUE(std::isfinite(v)) << "row " << row;
      zero = zero && v == 0.0f;
    }
    EXPECT_EQ(zero, row != 0 && row != 4) << "row " << row << ": only rows with a valid target have a gradient";
  }
  for (std::uint8_t byte : s.gw.to_vector<std::uint8_t>(300 * 64 * 4)) ASSERT_EQ(byte, 0x5a) << "grad_weight not asked for";
  s.op.check(nullptr);
}

// Chunks kept by a forward are used only by a backward of that forward's inputs: after a forward
// of the same inputs into another lse buffer, a backward that passes the first lse recomputes
// every chunk, and gives the recomputed bits; a backward that passes the latest lse gives the kept
// bits. With chunks of 3072 columns (two chunks) the forward keeps the first; with chunks of 1024
// (six) or 2048 (three) the first two, the second in the accumulator's memory, whose grad_hidden
// product runs in two bands on an H200 (4224 and 276 rows); with chunks of 1024 and a keep budget
// of two chunks, four, and with one of four more five (one left to recompute); with chunks of
// 2560 (three), wider than the accumulator's rows, and a budget of one chunk, the first two, the
// second in the keep buffer; with a budget that holds the whole shard beside the dZ budget's,
// all of it, as one chunk. On the Hopper loop, whose kept logits
// went through fp16: exactly the kept chunks' grad_weight rows differ from the recomputed ones;
// every row of grad_hidden stays close to the recomputed one (a band written over logits still
// to be read would not); and a backward without grad_hidden gives the kept grad_weight bits.
// (The correctness of both kinds against the reference is MatchesFp64Reference's.)
TEST_F(LinearLogpBwdDeviceTest, KeptChunksAreUsedOnlyByTheBackwardOfTheirForward) {
  const std::int64_t n = 4500, h = 1024, v = 6100;
  std::vector<std::uint8_t> x_bytes, w_bytes;
  testing::random_values(31, static_cast<std::size_t>(n * h), 1.0f, DType::kBF16, x_bytes);
  testing::random_values(32, static_cast<std::size_t>(v * h), 0.125f, DType::kBF16, w_bytes);
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) targets[static_cast<std::size_t>(i)] = (i * 7919) % v;
  std::vector<float> grad(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) grad[static_cast<std::size_t>(i)] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  DeviceArray x(x_bytes.size()), w(w_bytes.size()), logp(n * 4), lse1(n * 4), lse2(n * 4), gx(n * h * 2),
      gw(v * h * 2);
  x.upload(x_bytes.data(), x_bytes.size());
  w.upload(w_bytes.data(), w_bytes.size());
  DeviceArray t = DeviceArray::from(targets), g = DeviceArray::from(grad);
  const LinearLogpInputs in{{x.data(), DType::kBF16, n, h, 0}, {w.data(), DType::kBF16, v, h, 0}, {}, {t.data(), DType::kInt64, n}};

  struct Kept {
    std::int64_t chunk_cols;
    std::int64_t kept_cols;  // on the Hopper loop
    std::int64_t keep_bytes = 0;
  };
  for (const Kept& k : {Kept{3072, 3072}, Kept{1024, 2048}, Kept{2048, 4096}, Kept{1024, 4096, 2 * n * 1024 * 2},
                        Kept{1024, 5120, 4 * n * 1024 * 2}, Kept{2560, 5120, n * 2560 * 2},
                        Kept{1024, 6100, n * 6144 * 2}}) {
    SCOPED_TRACE("chunks of " + std::to_string(k.chunk_cols) + " columns, keep budget " + std::to_string(k.keep_bytes));
    LinearLogpConfig config;
    config.hidden = h;
    config.vocab_local = v;
    config.want_backward = true;
    config.backward_workspace_bytes = n * 2 * k.chunk_cols;
    config.keep_logits_bytes = k.keep_bytes;
    LinearLogp op(shared_runtime(), config);
    auto forward = [&](DeviceArray& lse) {
      op.forward(in, {{logp.data(), DType::kFP32, n}, {lse.data(), DType::kFP32, n}, {}}, nullptr);
    };
    auto backward = [&](DeviceArray& lse, bool grad_hidden = true) {
      LinearLogpGrads grads;
      if (grad_hidden) grads.hidden = {gx.data(), DType::kBF16, n, h, 0};
      grads.weight = {gw.data(), DType::kBF16, v, h, 0};
      gx.fill_bytes(0xff);
      gw.fill_bytes(0xff);
      op.backward(in, {lse.data(), DType::kFP32, n}, {g.data(), DType::kFP32, n}, {}, grads, nullptr);
      return std::make_pair(gx.to_vector<std::uint8_t>(gx.bytes()), gw.to_vector<std::uint8_t>(gw.bytes()));
    };

    forward(lse1);
    const auto kept = backward(lse1);
    const auto recomputed = backward(lse1);  // the kept chunks are used up
    forward(lse1);
    forward(lse2);
    EXPECT_EQ(lse1.to_vector<std::uint8_t>(n * 4), lse2.to_vector<std::uint8_t>(n * 4));
    EXPECT_EQ(backward(lse1), recomputed) << "a backward of another forward's lse must recompute";
    forward(lse2);
    EXPECT_EQ(backward(lse2), kept) << "the backward of the latest forward uses its kept chunks";
    forward(lse2);
    EXPECT_EQ(backward(lse2, false).second, kept.second) << "grad_weight alone, from the kept chunks";
    if (std::string(op.main_loop()) != "wgmma") continue;
    EXPECT_NE(kept.first, recomputed.first) << "no kept chunk was used";
    const auto row_bytes = static_cast<std::ptrdiff_t>(h * 2);
    const auto kept_end = static_cast<std::ptrdiff_t>(k.kept_cols) * row_bytes;
    for (std::int64_t begin = 0; begin < v; begin += k.chunk_cols) {
      const std::int64_t end = std::min(begin + k.chunk_cols, v);
      const bool same = std::equal(kept.second.begin() + begin * row_bytes, kept.second.begin() + end * row_bytes,
                                   recomputed.second.begin() + begin * row_bytes);
      EXPECT_EQ(same, begin * row_bytes >= kept_end) << "grad_weight rows of the chunk at column " << begin;
    }
    const std::vector<float> dx_kept = to_floats(kept.first, DType::kBF16, static_cast<std::size_t>(n * h));
    const std::vector<float> dx = to_floats(recomputed.first, DType::kBF16, static_cast<std::size_t>(n * h));
    for (std::int64_t row = 0; row < n; ++row) {
      double diff = 0.0, norm = 0.0;
      for (std::int64_t col = 0; col < h; ++col) {
        const auto at = static_cast<std::size_t>(row * h + col);
        diff += (dx_kept[at] - dx[at]) * static_cast<double>(dx_kept[at] - dx[at]);
        norm += dx[at] * static_cast<double>(dx[at]);
      }
      ASSERT_LT(std::sqrt(diff), 2e-2 * std::sqrt(norm)) << "grad_hidden row " << row;
    }
  }
}

}  // namespace
}  // namespace shardjit
