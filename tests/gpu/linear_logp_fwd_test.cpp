// LinearLogp forward on one GPU against an fp64 CPU reference over the same rounded inputs, on
// fresh random data, for every dtype and odd shapes. Outputs are poisoned (NaN) before each
// run, so an element the op fails to write fails the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/logp_case.hpp"
#include "support/reference.hpp"
#include "support/runtime_with.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;

struct FwdCase : testing::LogpCase {
  bool entropy = false;
  bool ignore_rows = false;
  std::int64_t row_stride = 0;  // hidden row stride; 0: packed
  float bias_offset = 0;         // added to every bias value (an fp32 bias)
  std::int64_t forbid_every = 0;  // forbidden tokens (bias -inf, testing::forbid_tokens); 0: none
};

Runtime& shared_runtime() {
  static Runtime runtime;  // cache folder from SHARDJIT_CACHE_DIR, shared across the suite
  return runtime;
}

using testing::runtime_with;

struct Outcome {
  double max_abs_logp = 0, max_abs_lse = 0, max_abs_entropy = 0;
  double rel_norm_logp = 0;
  std::string main_loop;
};

class LinearLogpFwdTest : public ::testing::TestWithParam<FwdCase> {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

// Builds the problem, runs the op, compares; returns the error summary.
Outcome run_case(const FwdCase& c, std::uint64_t seed, Runtime& runtime = shared_runtime()) {
  testing::LogpProblem p = testing::logp_problem(c);
  const std::int64_t stride = c.row_stride ? c.row_stride : c.hidden;

  std::vector<std::uint8_t> x_bytes, w_bytes, b_bytes;
  // Logits of order one: x in [-1, 1], w in [-4/sqrt(H), 4/sqrt(H)].
  std::vector<float> x_strided = testing::random_values(seed, static_cast<std::size_t>(c.n * stride), 1.0f, c.dtype, x_bytes);
  p.hidden_values.resize(static_cast<std::size_t>(c.n * c.hidden));
  for (std::int64_t i = 0; i < c.n; ++i)
    std::copy_n(x_strided.begin() + i * stride, c.hidden, p.hidden_values.begin() + i * c.hidden);
  const float w_scale = 4.0f / std::sqrt(static_cast<float>(c.hidden));
  p.weight_values = testing::random_values(seed + 1, static_cast<std::size_t>(c.vocab * c.hidden), w_scale, c.dtype, w_bytes);
  if (c.bias) p.bias_values = testing::random_values(seed + 2, static_cast<std::size_t>(c.vocab), 1.0f, *c.bias, b_bytes);
  if (c.bias_offset != 0) {
    EXPECT_EQ(*c.bias, DType::kFP32) << "the offset is added to an fp32 bias";
    for (float& b : p.bias_values) b += c.bias_offset;
    b_bytes.resize(p.bias_values.size() * sizeof(float));
    std::memcpy(b_bytes.data(), p.bias_values.data(), b_bytes.size());
  }
  if (c.forbid_every > 0) testing::forbid_tokens(p, *c.bias, b_bytes, c.forbid_every);

  std::mt19937_64 rng(seed + 3);
  std::uniform_int_distribution<std::int64_t> pick(0, p.valid_vocab - 1);
  p.targets.resize(static_cast<std::size_t>(c.n));
  for (std::int64_t i = 0; i < c.n; ++i) {
    p.targets[static_cast<std::size_t>(i)] = pick(rng);
    if (c.ignore_rows && i % 5 == 2) p.targets[static_cast<std::size_t>(i)] = p.ignore_index;
  }
  if (c.n > 1) p.targets[1] = p.valid_vocab - 1;  // the last valid column (tail tile)
  if (c.n > 0) p.targets[0] = 0;
  if (c.forbid_every > 0 && c.n > 2) p.targets[2] = testing::kFirstForbidden;

  LinearLogpConfig config = testing::logp_config(c);
  config.want_entropy = c.entropy;
  LinearLogp op(runtime, config);

  DeviceArray x(x_bytes.size()), w(w_bytes.size()), b(std::max<std::size_t>(b_bytes.size(), 16));
  x.upload(x_bytes.data(), x_bytes.size());
  w.upload(w_bytes.data(), w_bytes.size());
  b.upload(b_bytes.data(), b_bytes.size());
  std::vector<std::int32_t> t32(p.targets.begin(), p.targets.end());
  DeviceArray t = c.targets == DType::kInt32 ? DeviceArray::from(t32) : DeviceArray::from(p.targets);
  const std::size_t out_bytes = static_cast<std::size_t>(std::max<std::int64_t>(c.n, 1)) * 4;
  DeviceArray logp(out_bytes), lse(out_bytes), entropy(out_bytes);
  for (DeviceArray* o : {&logp, &lse, &entropy}) o->fill_bytes(0xff);

  LinearLogpInputs in;
  in.hidden = {x.data(), c.dtype, c.n, c.hidden, stride};
  in.weight = {w.data(), c.dtype, c.vocab, c.hidden, 0};
  if (c.bias) in.bias = {b.data(), *c.bias, c.vocab};
  in.targets = {t.data(), c.targets, c.n};
  LinearLogpOutputs out;
  out.logp = {logp.data(), DType::kFP32, c.n};
  out.lse = {lse.data(), DType::kFP32, c.n};
  if (c.entropy) out.entropy = {entropy.data(), DType::kFP32, c.n};
  op.forward(in, out, nullptr);
  EXPECT_EQ(op.check(nullptr).bad_rows, 0);

  auto got_logp = logp.to_vector<float>(static_cast<std::size_t>(c.n));
  auto got_lse = lse.to_vector<float>(static_cast<std::size_t>(c.n));
  auto got_entropy = entropy.to_vector<float>(static_cast<std::size_t>(c.n));
  for (std::int64_t i = 0; i < c.n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_TRUE(std::isfinite(got_logp[k])) << "logp[" << i << "] not written or not finite";
    EXPECT_TRUE(std::isfinite(got_lse[k])) << "lse[" << i << "] not written or not finite";
    EXPECT_LE(got_logp[k], 1e-5f) << "positive log-probability at row " << i;
    if (c.entropy) {
      EXPECT_TRUE(std::isfinite(got_entropy[k])) << "entropy[" << i << "]";
    }
  }

  std::vector<std::int64_t> rows;
  const std::int64_t sampled = std::min<std::int64_t>(c.n, 96);
  for (std::int64_t j = 0; j < sampled; ++j) rows.push_back(c.n <= 96 ? j : (j * (c.n - 1)) / (sampled - 1));
  if (c.forbid_every > 0 && c.n > 96) rows.push_back(2);  // the forbidden target
  auto ref = testing::reference_logp_rows(p, rows);

  Outcome o;
  o.main_loop = op.main_loop();
  double err2 = 0, ref2 = 0;
  for (std::size_t j = 0; j < rows.size(); ++j) {
    const auto k = static_cast<std::size_t>(rows[j]);
    if (ref[j].logp == -INFINITY) {  // a forbidden target: probability 0, its z read as a finite floor
      EXPECT_LT(got_logp[k], testing::kForbiddenLogp) << "logp of a forbidden target at row " << rows[j];
      o.max_abs_lse = std::max(o.max_abs_lse, std::abs(got_lse[k] - ref[j].lse));
      if (c.entropy) o.max_abs_entropy = std::max(o.max_abs_entropy, std::abs(got_entropy[k] - ref[j].entropy));
      continue;
    }
    const double e_logp = std::abs(got_logp[k] - ref[j].logp);
    const double e_lse = std::abs(got_lse[k] - ref[j].lse);
    o.max_abs_logp = std::max(o.max_abs_logp, e_logp);
    o.max_abs_lse = std::max(o.max_abs_lse, e_lse);
    err2 += e_logp * e_logp;
    ref2 += ref[j].logp * ref[j].logp;
    if (c.entropy) o.max_abs_entropy = std::max(o.max_abs_entropy, std::abs(got_entropy[k] - ref[j].entropy));
    if (p.targets[k] == p.ignore_index) {
      EXPECT_EQ(got_logp[k], 0.0f) << "ignored row " << rows[j];
    }
  }
  o.rel_norm_logp = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return o;
}

void expect_accurate(const FwdCase& c, const Outcome& o, const char* tile) {
  std::printf("[ accuracy ] %-28s %s max|dlogp| %.3e max|dlse| %.3e max|dH| %.3e rel-norm(logp) %.3e (%s%s)\n", c.name,
              dtype_name(c.dtype), o.max_abs_logp, o.max_abs_lse, o.max_abs_entropy, o.rel_norm_logp,
              o.main_loop.c_str(), tile);
  EXPECT_LT(o.max_abs_logp, 2e-3);
  EXPECT_LT(o.max_abs_lse, 2e-3);
  EXPECT_LT(o.max_abs_entropy, 2e-3);
  EXPECT_LT(o.rel_norm_logp, 1e-3);
}

std::uint64_t case_seed(const FwdCase& c) { return 1000 + static_cast<std::uint64_t>(c.n * 7 + c.vocab); }

TEST_P(LinearLogpFwdTest, MatchesFp64Reference) {
  const FwdCase& c = GetParam();
  expect_accurate(c, run_case(c, case_seed(c)), "");
}

// Every 16-bit case again with every call in each of the Hopper loop's other tiles
// (SHARDJIT_FWD_TILE), not only the calls the rule gives them (fwd.hpp, choose_fwd_plan).
TEST_P(LinearLogpFwdTest, MatchesFp64ReferenceInTheOtherTiles) {
  const FwdCase& c = GetParam();
  if (c.dtype == DType::kFP32) GTEST_SKIP() << "the Hopper loop takes 16-bit inputs";
  if (shared_runtime().impl().device(0).arch() != "sm_90a") GTEST_SKIP() << "the other tiles are the Hopper loop's";
  const std::vector<FwdTile> others = hopper_other_fwd_tiles(c.dtype, "sm_90a", true);
  ASSERT_EQ(others.size(), 8u) << "128 x 128, 128 x 192 and the rows as N in 136, 152 and 168 rows by 128 and 256";
  for (const FwdTile& tile : others) {
    const std::string name = fwd_tile_name(tile);
    const std::string label = ", tile " + name;
    expect_accurate(c, run_case(c, case_seed(c), runtime_with("SHARDJIT_FWD_TILE", name)), label.c_str());
  }
}

const FwdCase kCases[] = {
    {"n1_h64_v1", 1, 64, 1},
    {"n7_h64_v300_bias_temp", 7, 64, 300, 0, DType::kBF16, DType::kBF16, DType::kInt32, 0.7f, true},
    {"n129_h2048_v300_pad", 129, 2048, 300, 290, DType::kFP16, std::nullopt, DType::kInt64, 1.0f, false, true},
    {"n129_h2048_v50257_fp32", 129, 2048, 50257, 0, DType::kFP32, DType::kFP32, DType::kInt64, 1.0f, true},
    {"n1000_h4096_v50257", 1000, 4096, 50257, 0, DType::kBF16, DType::kFP32, DType::kInt64, 1.0f, true, true},
    {"n4096_h4096_v128256", 4096, 4096, 128256},
    {"n1000_h5120_v64128_fp16", 1000, 5120, 64128, 0, DType::kFP16, std::nullopt, DType::kInt64, 1.3f, true},
    {"n7_h5120_v128256_pad", 7, 5120, 128256, 128000, DType::kBF16, std::nullopt, DType::kInt32},
    {"n7_h64_v1_fp32", 7, 64, 1, 0, DType::kFP32},
    {"n1_h4096_v128256_fp16", 1, 4096, 128256, 0, DType::kFP16},
    // Fewer rows than the Hopper tile: X is read in place in boxes of the rows rounded up to 8
    // (strided X here), the stage's other rows stale.
    {"n33_h2048_v3001_strided_short_box", 33, 2048, 3001, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true,
     true, 2056},
    {"n127_h4096_v50257_fp16_short_box", 127, 4096, 50257, 0, DType::kFP16},
    // 64 rows: the second warpgroup has none and issues no products; 65: it has one, in a box of 72
    // rows; 8: a box of exactly the call's rows, strided.
    {"n64_h4096_v16032_one_warpgroup", 64, 4096, 16032, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, true},
    {"n65_h1000_v5000_second_warpgroup_row", 65, 1000, 5000, 0, DType::kFP16, std::nullopt, DType::kInt32, 1.1f, true},
    {"n8_h512_v7000_strided_whole_box", 8, 512, 7000, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, false, false,
     520},
    // Every logit below -140, where exp would underflow against a running max that started at 0
    // instead of -inf: lse, logp and entropy must still match.
    {"n300_h128_v5000_negative_logits", 300, 128, 5000, 0, DType::kBF16, DType::kFP32, DType::kInt64, 1.0f, true, false,
     0, -150.0f},
    {"n1000_h4096_v300_fp32", 1000, 4096, 300, 0, DType::kFP32, DType::kBF16, DType::kInt32, 0.5f, true, true},
    {"n129_h2048_v300_strided", 129, 2048, 300, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, false, false, 2056},
    // H not a multiple of the 64-wide K slice: the last slice is zero-filled past H.
    {"n129_h200_v3001_ktail", 129, 200, 3001, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, true},
    {"n300_h72_v1000_ktail_fp16", 300, 72, 1000, 0, DType::kFP16},
    // On 132 multiprocessors the last waves' units are cut into pieces (linear_logp/fwd_block_order.cuh):
    // whole units that also write empty partials, and pieces, four a unit in both cases
    // (n4096_h4096_v128256 above is all pieces).
    {"n5000_h64_v60000_cut", 5000, 64, 60000, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, true},
    {"n2500_h64_v60000_cut_fp32", 2500, 64, 60000, 0, DType::kFP32},
    // Three row tiles on 132 multiprocessors: the one-wave split count, 44 (not a power of two),
    // with entropy; a last row tile of 77 rows.
    {"n333_h256_v32000_one_wave", 333, 256, 32000, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true},
    // Small vocabulary shards at few rows, as the sweep's TP heads: 63 one-tile blocks; a K tail
    // with padding and a bias; 149 tiles over 128 splits; three row tiles, the last of 77 rows.
    {"n7_h4096_v16032_small_shard", 7, 4096, 16032, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true},
    {"n1_h2000_v16160_small_shard_pad_fp16", 1, 2000, 16160, 16100, DType::kFP16, DType::kFP32, DType::kInt32, 0.9f},
    {"n100_h1024_v38016_small_shard_splits", 100, 1024, 38016, 37990, DType::kBF16, DType::kBF16, DType::kInt32, 0.8f,
     true, true},
    {"n333_h3000_v16032_small_shard_rows", 333, 3000, 16032, 0, DType::kFP16, std::nullopt, DType::kInt64, 1.0f, true},
    // One row tile of a shard of 197 wide tiles: 132 splits of three narrow tiles each (a split on
    // every multiprocessor), merged in the forward kernel (7 rows of 16 lanes).
    {"n7_h1024_v50257_every_multiprocessor", 7, 1024, 50257, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true},
    // For the tiles of the rows as N (136, 152 and 168 rows by 128 and 256 columns,
    // MatchesFp64ReferenceInTheOtherTiles): 333 rows, in 168-row tiles two, the second of 165 rows
    // (in 136: three, the last of 61), a padded shard with a bias, temperature, entropy and ignored
    // rows (its last 256-column tile of 118 valid columns: one warpgroup with none); 150 rows, one
    // row tile of 168 or 152 (two of 136), an fp32 bias; a vocabulary tail of 31 columns (159 in
    // 256-column tiles).
    {"n333_h2000_v25000_rows_as_n_pad", 333, 2000, 25000, 24950, DType::kBF16, DType::kBF16, DType::kInt32, 0.8f, true,
     true},
    {"n150_h512_v60000_rows_as_n_one_tile_fp16", 150, 512, 60000, 0, DType::kFP16, DType::kFP32, DType::kInt64, 1.2f,
     true},
    {"n300_h4096_v39967_rows_as_n_tail", 300, 4096, 39967, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, false},
    // One the rule gives them (fwd_tile_cost by K): one row tile of 150 rows, a tail of 31 columns
    // (159 in 256-column tiles).
    {"n150_h4096_v31903_rows_as_n_by_rule", 150, 4096, 31903, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f,
     true},
    // The last row tile in a box of its rows rounded up to 8 (tail_box_rows): 300 rows' third tile of
    // 44 rows in a box of 48 (n4097_h2880_v25136_tp8_shard below: a last row in a box of 8).
    {"n300_h1024_v20000_tail_box", 300, 1024, 20000, 0, DType::kBF16, DType::kBF16, DType::kInt64, 1.0f, true, true},
    // Forbidden tokens (bias -inf: a logit mask folded into the bias) at every 7th, 5th or 3rd
    // column and in runs of whole tiles, row 2's target among them: probability 0, a finite entropy
    // and a logp below -1e29, with ignored rows and padding; fp32 with an fp16 bias. At 1.0, 1.2 and
    // 2.0, temperatures where an inexact floor * log2(e) / T gave a whole forbidden tile a term of
    // +inf (bias_read.cuh).
    {"n150_h512_v20000_forbidden_tokens", 150, 512, 20000, 19990, DType::kBF16, DType::kBF16, DType::kInt64, 1.2f, true,
     true, 0, 0.0f, 7},
    {"n7_h256_v5000_forbidden_tokens_fp16", 7, 256, 5000, 0, DType::kFP16, DType::kFP32, DType::kInt32, 1.0f, true, false,
     0, 0.0f, 3},
    {"n129_h200_v3001_forbidden_tokens_fp32", 129, 200, 3001, 0, DType::kFP32, DType::kFP16, DType::kInt64, 2.0f, true,
     false, 0, 0.0f, 5},
    // A sweep head's odd shape: gpt-oss-20b's TP8 shard (hidden 2880, 201088 / 8 rows) at N = 4097.
    {"n4097_h2880_v25136_tp8_shard", 4097, 2880, 25136, 0, DType::kBF16, std::nullopt, DType::kInt64, 1.0f, true},
};

INSTANTIATE_TEST_SUITE_P(Shapes, LinearLogpFwdTest, ::testing::ValuesIn(kCases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

class LinearLogpFwdDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

LinearLogpConfig small_config() {
  LinearLogpConfig config;
  config.hidden = 64;
  config.vocab_local = 300;
  return config;
}

TEST_F(LinearLogpFwdDeviceTest, BadTargetsGiveNaNAndAreReported) {
  LinearLogp op(shared_runtime(), small_config());
  const std::int64_t n = 6;
  std::vector<std::uint8_t> x_bytes, w_bytes;
  testing::random_values(7, n * 64, 1.0f, DType::kBF16, x_bytes);
  testing::random_values(8, 300 * 64, 0.5f, DType::kBF16, w_bytes);
  DeviceArray x(x_bytes.size()), w(w_bytes.size());
  x.upload(x_bytes.data(), x_bytes.size());
  w.upload(w_bytes.data(), w_bytes.size());
  std::vector<std::int64_t> targets = {5, 300, -100, -7, 299, 1000};
  DeviceArray t = DeviceArray::from(targets);
  DeviceArray logp(n * 4);
  logp.fill_bytes(0xff);
  op.forward({{x.data(), DType::kBF16, n, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {}, {t.data(), DType::kInt64, n}},
             {{logp.data(), DType::kFP32, n}, {}, {}}, nullptr);
  auto got = logp.to_vector<float>(n);
  EXPECT_TRUE(std::isfinite(got[0]));
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], 0.0f);
  EXPECT_TRUE(std::isnan(got[3]));
  EXPECT_TRUE(std::isfinite(got[4]));
  EXPECT_TRUE(std::isnan(got[5]));
  BadTargetReport report = op.check(nullptr);
  EXPECT_EQ(report.bad_rows, 3);
  EXPECT_TRUE(report.first_bad_id == 300 || report.first_bad_id == -7 || report.first_bad_id == 1000);
  EXPECT_EQ(op.check(nullptr).bad_rows, 0) << "check() clears the record";
}

// `op`'s forward of n rows of bf16 X [n][hidden] (packed) against bf16 W [vocab][hidden] and int64
// targets, into outputs poisoned with NaN: logp, lse and entropy, one after another.
std::vector<float> forward_outputs(LinearLogp& op, const DeviceArray& x, const DeviceArray& w, const DeviceArray& t,
                                   std::int64_t n, std::int64_t hidden, std::int64_t vocab) {
  DeviceArray logp(n * 4), lse(n * 4), entropy(n * 4);
  for (DeviceArray* o : {&logp, &lse, &entropy}) o->fill_bytes(0xff);
  op.forward({{x.data(), DType::kBF16, n, hidden, 0}, {w.data(), DType::kBF16, vocab, hidden, 0}, {},
              {t.data(), DType::kInt64, n}},
             {{logp.data(), DType::kFP32, n}, {lse.data(), DType::kFP32, n}, {entropy.data(), DType::kFP32, n}},
             nullptr);
  std::vector<float> all = logp.to_vector<float>(static_cast<std::size_t>(n));
  for (const DeviceArray* o : {&lse, &entropy}) {
    const std::vector<float> more = o->to_vector<float>(static_cast<std::size_t>(n));
    all.insert(all.end(), more.begin(), more.end());
  }
  return all;
}

// A last row tile of fewer rows than the forward tile leaves the tile's other rows stale on the
// Hopper loop: the stages past its X box (tail_box_rows) hold whatever the shared memory held, here
// a larger call's rows of large logits. They must not reach the results, which come out bit for
// bit as from an op that never ran the larger call. Calls of 5 rows (one tile), of 136 (a last
// tile of 8 rows in a box of 8) and of 249 (121 rows in a whole box); through the forward kernel,
// and with want_backward keeping the whole shard as one chunk: through the kept chunk's kernel, or
// the forward that keeps it itself where the plan takes 128-column tiles of the rows as N.
class SmallCallAfterALargerOne : public LinearLogpFwdDeviceTest,
                                 public ::testing::WithParamInterface<std::tuple<bool, std::int64_t>> {};

TEST_P(SmallCallAfterALargerOne, MatchesAFreshOp) {
  LinearLogpConfig config;
  config.hidden = 256;
  config.vocab_local = 3001;
  config.want_entropy = true;
  config.want_backward = std::get<0>(GetParam());
  LinearLogp used(shared_runtime(), config);
  LinearLogp fresh(shared_runtime(), config);
  const std::int64_t big = 300, small = std::get<1>(GetParam());
  std::vector<std::uint8_t> x_big, x_small, w_bytes;
  testing::random_values(21, big * 256, 30.0f, DType::kBF16, x_big);  // large logits in the stale rows
  testing::random_values(22, small * 256, 1.0f, DType::kBF16, x_small);
  testing::random_values(23, 3001 * 256, 0.25f, DType::kBF16, w_bytes);
  DeviceArray xb(x_big.size()), xs(x_small.size()), w(w_bytes.size());
  xb.upload(x_big.data(), x_big.size());
  xs.upload(x_small.data(), x_small.size());
  w.upload(w_bytes.data(), w_bytes.size());
  std::vector<std::int64_t> targets(big);
  for (std::int64_t i = 0; i < big; ++i) targets[static_cast<std::size_t>(i)] = (i * 37) % 3001;
  DeviceArray t = DeviceArray::from(targets);
  auto run = [&](LinearLogp& op, const DeviceArray& x, std::int64_t n) {
    return forward_outputs(op, x, w, t, n, 256, 3001);
  };
  run(used, xb, big);
  const std::vector<float> after_big = run(used, xs, small);
  const std::vector<float> alone = run(fresh, xs, small);
  ASSERT_EQ(after_big.size(), alone.size());
  for (std::size_t k = 0; k < alone.size(); ++k) {
    EXPECT_TRUE(std::isfinite(alone[k])) << "output " << k;
    EXPECT_EQ(std::memcmp(&after_big[k], &alone[k], sizeof(float)), 0) << "output " << k << ": " << after_big[k]
                                                                         << " vs " << alone[k];
  }
}

// A runtime whose Hopper forwards all merge their partials in the kernel, not only where the
// rule says.
Runtime& merging_runtime() { return runtime_with("SHARDJIT_FWD_MERGE", "1"); }

// On the Hopper loop the forward kernel merges each row tile's partials in its last block, through
// a counter a row tile that every call must leave at zero (templates/linear_logp/fwd_merge.cuh).
// One op runs calls of one, three, two and 33 row tiles in turn, twice over, and another op calls
// whose last waves are cut into pieces (5000 rows of H = 64: 8 splits of four pieces on 132
// multiprocessors, whole units and pieces adding to a row tile's count differently); each call
// must match an op that runs it alone: bit for bit under the rule, and within rounding where
// every call merges in the kernel (the combine kernel and the kernel's merge run the same code,
// compiled into different kernels).
class CallsOfEveryRowTileCount : public LinearLogpFwdDeviceTest, public ::testing::WithParamInterface<bool> {};

TEST_P(CallsOfEveryRowTileCount, MatchFreshOps) {
  const bool merge_everywhere = GetParam();
  struct Shape {
    std::int64_t hidden, vocab;
    std::vector<std::int64_t> calls;
  };
  // The third shape's calls of 333 rows run 128 x 192 tiles by the rule (fwd.hpp, choose_fwd_plan),
  // its calls of one row tile narrow ones, its others the op's wide ones.
  for (const Shape& shape : {Shape{320, 40000, {7, 333, 129, 4100, 1}}, Shape{64, 60000, {5000, 7, 5000}},
                             Shape{512, 16032, {333, 7, 333, 129}}}) {
    LinearLogpConfig config;
    config.hidden = shape.hidden;
    config.vocab_local = shape.vocab;
    config.want_entropy = true;
    LinearLogp used(merge_everywhere ? merging_runtime() : shared_runtime(), config);
    const std::int64_t most = *std::max_element(shape.calls.begin(), shape.calls.end());
    std::vector<std::uint8_t> x_bytes, w_bytes;
    testing::random_values(31, most * shape.hidden, 1.0f, DType::kBF16, x_bytes);
    testing::random_values(32, shape.vocab * shape.hidden, 4.0f / std::sqrt(static_cast<float>(shape.hidden)),
                           DType::kBF16, w_bytes);
    DeviceArray x(x_bytes.size()), w(w_bytes.size());
    x.upload(x_bytes.data(), x_bytes.size());
    w.upload(w_bytes.data(), w_bytes.size());
    std::vector<std::int64_t> targets(most);
    for (std::int64_t i = 0; i < most; ++i) targets[static_cast<std::size_t>(i)] = (i * 7919) % shape.vocab;
    DeviceArray t = DeviceArray::from(targets);
    auto run = [&](LinearLogp& op, std::int64_t n) {
      return forward_outputs(op, x, w, t, n, shape.hidden, shape.vocab);
    };
    for (int round = 0; round < 2; ++round) {
      for (std::int64_t n : shape.calls) {
        const std::vector<float> got = run(used, n);
        LinearLogp fresh(shared_runtime(), config);
        const std::vector<float> alone = run(fresh, n);
        ASSERT_EQ(got.size(), alone.size());
        int wrong = 0;
        for (std::size_t k = 0; k < alone.size(); ++k) {
          EXPECT_TRUE(std::isfinite(alone[k])) << "H " << shape.hidden << " n " << n << " output " << k;
          const bool same = merge_everywhere ? std::abs(got[k] - alone[k]) <= 1e-5f * (1.0f + std::abs(alone[k]))
                                             : std::memcmp(&got[k], &alone[k], sizeof(float)) == 0;
          if (!same && ++wrong <= 5) {
            ADD_FAILURE() << "H " << shape.hidden << " round " << round << " n " << n << " output " << k << ": "
                          << got[k] << " vs " << alone[k];
          }
        }
        EXPECT_EQ(wrong, 0) << "H " << shape.hidden << " round " << round << " n " << n;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Merge, CallsOfEveryRowTileCount, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return std::string(param.param ? "InTheKernelEverywhere" : "ByTheRule");
                         });

INSTANTIATE_TEST_SUITE_P(KeptOrNot, SmallCallAfterALargerOne,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(std::int64_t{5}, std::int64_t{136}, std::int64_t{249})),
                         [](const ::testing::TestParamInfo<std::tuple<bool, std::int64_t>>& param) {
                           return std::string(std::get<0>(param.param) ? "WantBackward" : "ForwardOnly") +
                                  std::to_string(std::get<1>(param.param)) + "Rows";
                         });

// Outputs on top of each other or of an input would be overwritten in the kernels' own order:
// refused by name before anything is enqueued.
TEST_F(LinearLogpFwdDeviceTest, OverlappingOutputsAreRefused) {
  LinearLogp op(shared_runtime(), small_config());
  const std::int64_t n = 4;
  DeviceArray x(n * 64 * 2), w(300 * 64 * 2), out(n * 4 * 2);
  DeviceArray t = DeviceArray::from(std::vector<std::int64_t>{1, 2, 3, 4});
  const LinearLogpInputs in{{x.data(), DType::kBF16, n, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {},
                            {t.data(), DType::kInt64, n}};
  auto* half = static_cast<char*>(out.data()) + 8;  // lse starting inside logp
  const std::pair<LinearLogpOutputs, const char*> cases[] = {
      {{{out.data(), DType::kFP32, n}, {half, DType::kFP32, n}, {}}, "logp: shares memory with the output lse"},
      {{{x.data(), DType::kFP32, n}, {}, {}}, "logp: shares memory with the input hidden"},
  };
  for (const auto& [outputs, says] : cases) {
    try {
      op.forward(in, outputs, nullptr);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

TEST_F(LinearLogpFwdDeviceTest, StrictModeThrowsOnBadTargets) {
  LinearLogpConfig config = small_config();
  config.strict = true;
  LinearLogp op(shared_runtime(), config);
  std::vector<std::uint8_t> x_bytes, w_bytes;
  testing::random_values(9, 2 * 64, 1.0f, DType::kBF16, x_bytes);
  testing::random_values(10, 300 * 64, 0.5f, DType::kBF16, w_bytes);
  DeviceArray x(x_bytes.size()), w(w_bytes.size()), logp(8);
  x.upload(x_bytes.data(), x_bytes.size());
  w.upload(w_bytes.data(), w_bytes.size());
  DeviceArray t = DeviceArray::from(std::vector<std::int64_t>{1, 301});
  try {
    op.forward({{x.data(), DType::kBF16, 2, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {}, {t.data(), DType::kInt64, 2}},
               {{logp.data(), DType::kFP32, 2}, {}, {}}, nullptr);
    FAIL() << "expected a device-status error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kDeviceStatus);
    EXPECT_NE(std::string(e.what()).find("301"), std::string::npos) << e.what();
  }
}

TEST_F(LinearLogpFwdDeviceTest, MainLoopFollowsTheDeviceAndTheHopperSwitch) {
  RuntimeOptions hopper_on, hopper_off;
  hopper_on.hopper_path = true;
  hopper_off.hopper_path = false;
  Runtime on(hopper_on), off(hopper_off);
  const bool sm90a = on.impl().device(0).arch() == "sm_90a";
  EXPECT_STREQ(LinearLogp(on, small_config()).main_loop(), sm90a ? "wgmma" : "mma.sync");
  EXPECT_STREQ(LinearLogp(off, small_config()).main_loop(), "mma.sync");
  LinearLogpConfig fp32 = small_config();
  fp32.dtype = DType::kFP32;
  EXPECT_STREQ(LinearLogp(on, fp32).main_loop(), "fp32 fma");
}

TEST_F(LinearLogpFwdDeviceTest, ZeroRowsLaunchNothing) {
  LinearLogp op(shared_runtime(), small_config());
  DeviceArray w(300 * 64 * 2);
  op.forward({{nullptr, DType::kBF16, 0, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {}, {nullptr, DType::kInt64, 0}},
             {{nullptr, DType::kFP32, 0}, {}, {}}, nullptr);
  EXPECT_EQ(op.check(nullptr).bad_rows, 0);
}

TEST_F(LinearLogpFwdDeviceTest, MisalignedHiddenIsAClearError) {
  LinearLogp op(shared_runtime(), small_config());
  DeviceArray x(4 * 64 * 2 + 16), w(300 * 64 * 2), t(4 * 8), logp(16);
  auto* shifted = static_cast<char*>(x.data()) + 2;
  try {
    op.forward({{shifted, DType::kBF16, 4, 64, 0}, {w.data(), DType::kBF16, 300, 64, 0}, {}, {t.data(), DType::kInt64, 4}},
               {{logp.data(), DType::kFP32, 4}, {}, {}}, nullptr);
    FAIL() << "expected an alignment error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("16-byte"), std::string::npos) << e.what();
  }
}

// max_rows sizes the workspace for calls of up to that many rows: more than one call takes is a
// mistake (and planning for it would take minutes), refused before anything is built.
TEST_F(LinearLogpFwdDeviceTest, MaxRowsBeyondOneCallIsRefused) {
  LinearLogpConfig config = small_config();
  config.want_backward = true;
  config.max_rows = std::int64_t{1} << 40;
  try {
    LinearLogp op(shared_runtime(), config);
    FAIL() << "expected max_rows to be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("max_rows = 1099511627776; expected at most "), std::string::npos)
        << e.what();
  }
  config.want_backward = false;
  config.max_rows = 65535LL * 64;  // within what a call takes with any forward tile (64 or 128 rows)
  EXPECT_NO_THROW(LinearLogp(shared_runtime(), config));
}

}  // namespace
}  // namespace shardjit
