// The partial-statistics combine kernel, compiled, loaded through the driver API and launched
// on random partials, against an fp64 CPU merge.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/runtime_impl.hpp"
#include "support/device_array.hpp"

namespace shardjit {
namespace {

using kernels::RowPartial;
using testing::DeviceArray;

struct Merged {
  double logp, lse, entropy;
};

Merged merge_fp64(const std::vector<RowPartial>& partials, int sources, std::int64_t n, std::int64_t row) {
  double m = -std::numeric_limits<double>::infinity(), target = m;
  for (int s = 0; s < sources; ++s) {
    const RowPartial& p = partials[static_cast<std::size_t>(s * n + row)];
    m = std::max<double>(m, p.max);
    target = std::max<double>(target, p.target);
  }
  double sum = 0, u = 0;
  for (int s = 0; s < sources; ++s) {
    const RowPartial& p = partials[static_cast<std::size_t>(s * n + row)];
    if (std::isinf(p.max)) continue;
    const double scale = std::exp(p.max - m);
    sum += p.sum * scale;
    u += scale * (p.ent + (p.max - m) * p.sum);
  }
  const double lse = m + std::log(sum);
  return {target - lse, lse, std::log(sum) - u / sum};
}

struct Combined {
  std::vector<float> logp, lse, entropy;
  unsigned bad_rows = 0;
};

// Launches the combine (with entropy, ignore_index -100) over `sources` slices of n partials.
Combined run_combine(const std::vector<RowPartial>& partials, const std::vector<std::int64_t>& targets, int sources,
                     std::int64_t vocab) {
  const auto n = static_cast<std::int64_t>(targets.size());
  Runtime runtime;
  auto kernel = runtime.impl().load(logp_combine_spec(DType::kInt64, true), 0, "(test)");
  DeviceArray d_partials = DeviceArray::from(partials), d_targets = DeviceArray::from(targets);
  DeviceArray logp(n * 4), lse(n * 4), entropy(n * 4), status(sizeof(kernels::DeviceStatus));
  for (DeviceArray* o : {&logp, &lse, &entropy}) o->fill_bytes(0xff);
  status.fill_bytes(0);

  kernels::LogpCombineArgs args{};
  args.sources = sources;
  args.partials = static_cast<const RowPartial*>(d_partials.data());
  args.source_stride = n;
  args.targets = d_targets.data();
  args.logp = static_cast<float*>(logp.data());
  args.lse = static_cast<float*>(lse.data());
  args.entropy = static_cast<float*>(entropy.data());
  args.status = static_cast<kernels::DeviceStatus*>(status.data());
  args.n_rows = n;
  args.valid_vocab = vocab;
  args.ignore_index = -100;
  {
    ScopedContext scope(testing::test_device());
    launch_logp_combine(*kernel, args, nullptr);
  }
  return {logp.to_vector<float>(n), lse.to_vector<float>(n), entropy.to_vector<float>(n),
          status.to_vector<kernels::DeviceStatus>(1)[0].bad_rows};
}

class LogpCombineTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

TEST_P(LogpCombineTest, MatchesFp64Merge) {
  const int sources = GetParam();
  const std::int64_t n = 1000;
  const std::int64_t vocab = 5000;
  std::mt19937_64 rng(static_cast<std::uint64_t>(sources) * 31 + 7);
  std::uniform_real_distribution<float> value(-8.0f, 8.0f), mass(1.0f, 100.0f), ent(-50.0f, 0.0f);
  std::vector<RowPartial> partials(static_cast<std::size_t>(sources * n));
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  std::uniform_int_distribution<int> owner(0, sources - 1);
  for (std::int64_t i = 0; i < n; ++i) {
    const int own = owner(rng);
    for (int s = 0; s < sources; ++s) {
      RowPartial& p = partials[static_cast<std::size_t>(s * n + i)];
      p = {value(rng), mass(rng), ent(rng), -std::numeric_limits<float>::infinity()};
      if (s == own) p.target = p.max - 0.5f;
      if (s != own && i % 7 == 3) p = {-std::numeric_limits<float>::infinity(), 0, 0, p.target};  // empty slice
    }
    targets[static_cast<std::size_t>(i)] = i % 11 == 5 ? -100 : (i * 13) % vocab;
  }

  const Combined got = run_combine(partials, targets, sources, vocab);
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    Merged ref = merge_fp64(partials, sources, n, i);
    const double want_logp = targets[k] == -100 ? 0.0 : ref.logp;
    worst = std::max({worst, std::abs(got.logp[k] - want_logp), std::abs(got.lse[k] - ref.lse),
                      std::abs(got.entropy[k] - ref.entropy) / std::max(1.0, std::abs(ref.entropy))});
  }
  EXPECT_LT(worst, 1e-4) << "S = " << sources;
  EXPECT_EQ(got.bad_rows, 0u);
}

// Rows whose every source is empty (no valid column anywhere, as for a vocabulary of padding
// only): lse is -inf and the entropy 0, not NaN; an ignored row's logp is 0, and a target that
// cannot be valid gives NaN and is counted. Rows with a column beside them stay finite.
TEST_P(LogpCombineTest, RowsWithEveryPartialEmpty) {
  const int sources = GetParam();
  const std::int64_t n = 300;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<RowPartial> partials(static_cast<std::size_t>(sources * n), RowPartial{-inf, 0.0f, 0.0f, -inf});
  std::vector<std::int64_t> targets(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const bool empty = i % 3 != 0;
    targets[static_cast<std::size_t>(i)] = empty ? (i % 2 == 0 ? -100 : 7 + i) : 0;
    // The other rows hold one column, z = 0.25, the target: logp 0, lse 0.25, entropy 0.
    if (!empty) partials[static_cast<std::size_t>((i % sources) * n + i)] = RowPartial{0.25f, 1.0f, 0.0f, 0.25f};
  }
  const Combined got = run_combine(partials, targets, sources, /*vocab=*/1);
  unsigned counted = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (i % 3 == 0) {
      EXPECT_EQ(got.logp[k], 0.0f) << "row " << i;
      EXPECT_EQ(got.lse[k], 0.25f) << "row " << i;
      EXPECT_EQ(got.entropy[k], 0.0f) << "row " << i;
      continue;
    }
    EXPECT_EQ(got.lse[k], -inf) << "row " << i;
    EXPECT_EQ(got.entropy[k], 0.0f) << "row " << i;
    if (targets[k] == -100) {
      EXPECT_EQ(got.logp[k], 0.0f) << "row " << i;
    } else {
      EXPECT_TRUE(std::isnan(got.logp[k])) << "row " << i;
      ++counted;
    }
  }
  EXPECT_EQ(got.bad_rows, counted);
}

INSTANTIATE_TEST_SUITE_P(Sources, LogpCombineTest, ::testing::Values(1, 2, 3, 8, 17, 37, 100, 128, 1024));

}  // namespace
}  // namespace shardjit
