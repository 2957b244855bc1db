// Forward tile autotuning on a GPU: an op built with autotune times its candidates and records
// the fastest in the cache; later ops follow the record (one naming a slower tile proves that
// they follow it rather than their default) and ignore a record naming a tile that is no
// candidate; every tile gives the fp64 reference's log-probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "runtime/cache/tuning_store.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/reference.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;

// 300 rows of H = 200 (a K tail) against 5003 columns (a vocabulary tail), bf16.
struct Problem {
  Problem() {
    p.n = 300;
    p.hidden = 200;
    p.vocab_local = 5003;
    p.valid_vocab = 5003;
    p.hidden_values = testing::random_values(71, static_cast<std::size_t>(p.n * p.hidden), 1.0f, DType::kBF16, x_bytes);
    p.weight_values = testing::random_values(72, static_cast<std::size_t>(p.vocab_local * p.hidden),
                                             4.0f / std::sqrt(200.0f), DType::kBF16, w_bytes);
    std::mt19937_64 rng(73);
    std::uniform_int_distribution<std::int64_t> pick(0, p.valid_vocab - 1);
    for (std::int64_t i = 0; i < p.n; ++i) p.targets.push_back(pick(rng));
    config.hidden = p.hidden;
    config.vocab_local = p.vocab_local;
    config.max_rows = p.n;
  }

  // The largest |logp - reference| over every row, from a forward of `op`.
  double max_error(LinearLogp& op) const {
    DeviceArray x(x_bytes.size()), w(w_bytes.size()), t = DeviceArray::from(p.targets), logp(static_cast<std::size_t>(p.n) * 4);
    x.upload(x_bytes.data(), x_bytes.size());
    w.upload(w_bytes.data(), w_bytes.size());
    logp.fill_bytes(0xff);
    LinearLogpInputs in;
    in.hidden = {x.data(), DType::kBF16, p.n, p.hidden, 0};
    in.weight = {w.data(), DType::kBF16, p.vocab_local, p.hidden, 0};
    in.targets = {t.data(), DType::kInt64, p.n};
    LinearLogpOutputs out;
    out.logp = {logp.data(), DType::kFP32, p.n};
    op.forward(in, out, nullptr);
    const std::vector<float> got = logp.to_vector<float>(static_cast<std::size_t>(p.n));
    std::vector<std::int64_t> rows(static_cast<std::size_t>(p.n));
    for (std::int64_t i = 0; i < p.n; ++i) rows[static_cast<std::size_t>(i)] = i;
    const std::vector<testing::LogpRow> ref = testing::reference_logp_rows(p, rows);
    double worst = 0.0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const double error = std::abs(static_cast<double>(got[i]) - ref[i].logp);
      worst = std::isnan(error) ? INFINITY : std::max(worst, error);
    }
    return worst;
  }

  testing::LogpProblem p;
  std::vector<std::uint8_t> x_bytes, w_bytes;
  LinearLogpConfig config;
};

class LinearLogpTuningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }

  Runtime runtime(bool autotune) const {
    RuntimeOptions options;
    options.cache_dir = cache_.path().string();
    options.autotune = autotune;
    return Runtime(options);
  }

  // The record key of the problem's op on GPU 0, as the op computes it.
  std::string key(Runtime& rt) const {
    return op_fwd_tuning_key(rt.impl(), resolve_layout(problem_.config), rt.impl().device(0));
  }

  std::vector<FwdTile> candidates(Runtime& rt) const {
    return fwd_tile_candidates(DType::kBF16, rt.impl().device(0).arch(), rt.impl().config.hopper_path);
  }

  testing::TempDir cache_;
  Problem problem_;
};

TEST_F(LinearLogpTuningTest, AutotuneRecordsTheFastestCandidate) {
  Runtime rt = runtime(true);
  LinearLogp op(rt, problem_.config);
  const std::optional<TuningRecord> record = load_tuning_record(cache_.path(), key(rt));
  ASSERT_TRUE(record.has_value()) << "no tuning record under " << key(rt);
  const std::vector<FwdTile> tiles = candidates(rt);
  ASSERT_EQ(record->times_ms.size(), tiles.size());
  double best = INFINITY;
  for (std::size_t i = 0; i < tiles.size(); ++i) {
    EXPECT_EQ(record->times_ms[i].first, fwd_tile_name(tiles[i]));
    EXPECT_GT(record->times_ms[i].second, 0.0);
    best = std::min(best, record->times_ms[i].second);
    std::printf("[ tuning ] %s %.4f ms\n", record->times_ms[i].first.c_str(), record->times_ms[i].second);
  }
  const auto chosen = std::find_if(record->times_ms.begin(), record->times_ms.end(),
                                   [&](const auto& entry) { return entry.first == record->choice; });
  ASSERT_NE(chosen, record->times_ms.end()) << record->choice;
  EXPECT_EQ(chosen->second, best);
  EXPECT_EQ(record->device, rt.impl().device(0).info().name);
  EXPECT_LT(problem_.max_error(op), 2e-3);
}

TEST_F(LinearLogpTuningTest, LaterOpsFollowTheRecordWithoutTiming) {
  Runtime rt = runtime(false);
  const std::vector<FwdTile> tiles = candidates(rt);
  ASSERT_GE(tiles.size(), 2u);
  // Every candidate in turn: a record naming it makes the op run it, and it is right.
  for (const FwdTile& tile : tiles) {
    TuningRecord record;
    record.key = key(rt);
    record.device = "recorded by the test";
    record.choice = fwd_tile_name(tile);
    save_tuning_record(cache_.path(), record);
    LinearLogp op(rt, problem_.config);
    EXPECT_STREQ(op.main_loop(), tile.wgmma ? "wgmma" : "mma.sync") << record.choice;
    EXPECT_LT(problem_.max_error(op), 2e-3) << record.choice;
    // Autotune off: the record is read, never rewritten.
    EXPECT_EQ(load_tuning_record(cache_.path(), key(rt))->device, "recorded by the test");
  }
}

TEST_F(LinearLogpTuningTest, CacheOnlyWithoutTheRecordedKernelTakesTheDefault) {
  {
    Runtime jit = runtime(false);
    LinearLogp compiled(jit, problem_.config);  // the default tile's kernels: in the cache or the library's table
  }
  RuntimeOptions options;
  options.cache_dir = cache_.path().string();
  options.jit = false;
  Runtime cache_only(options);
  const std::vector<FwdTile> tiles = candidates(cache_only);
  TuningRecord record;
  record.key = key(cache_only);
  record.device = "recorded by the test";
  record.choice = fwd_tile_name(tiles.back());  // never compiled into this cache
  save_tuning_record(cache_.path(), record);
  LinearLogp op(cache_only, problem_.config);
  EXPECT_STREQ(op.main_loop(), tiles.front().wgmma ? "wgmma" : "mma.sync");
  EXPECT_LT(problem_.max_error(op), 2e-3);
}

TEST_F(LinearLogpTuningTest, ARecordNamingNoCandidateIsIgnored) {
  Runtime rt = runtime(false);
  TuningRecord record;
  record.key = key(rt);
  record.device = "recorded by the test";
  record.choice = "256x256x64x4-mma";  // not a valid tile at all
  save_tuning_record(cache_.path(), record);
  LinearLogp op(rt, problem_.config);
  const FwdTile fallback = candidates(rt).front();
  EXPECT_STREQ(op.main_loop(), fallback.wgmma ? "wgmma" : "mma.sync");
  EXPECT_LT(problem_.max_error(op), 2e-3);
}

}  // namespace
}  // namespace shardjit
