// The fp64 references the GPU tiers compare the ops with, checked on the CPU: against values
// worked out by hand, and the gradients against finite differences of the forward reference. A
// wrong reference would otherwise pass or fail the GPU tests for the wrong reason, and CI has no
// GPU.
#include "support/grad_reference.hpp"
#include "support/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace shardjit::testing {
namespace {

// One row, H = 1, V = 3: x = 1, W = [1, 2, 3], so z = [1, 2, 3] (before bias and temperature).
LogpProblem three_logits() {
  LogpProblem p;
  p.n = 1;
  p.hidden = 1;
  p.vocab_local = 3;
  p.valid_vocab = 3;
  p.hidden_values = {1.0f};
  p.weight_values = {1.0f, 2.0f, 3.0f};
  p.targets = {1};
  return p;
}

double log_sum_exp(const std::vector<double>& z) {
  double sum = 0;
  for (double v : z) sum += std::exp(v);
  return std::log(sum);
}

double entropy_of(const std::vector<double>& z) {
  const double lse = log_sum_exp(z);
  double h = 0;
  for (double v : z) h -= std::exp(v - lse) * (v - lse);
  return h;
}

TEST(ReferenceLogp, MatchesTheFormulaByHand) {
  const LogpRow row = reference_logp_row(three_logits(), 0);
  const std::vector<double> z{1, 2, 3};
  EXPECT_NEAR(row.lse, log_sum_exp(z), 1e-12);
  EXPECT_NEAR(row.logp, 2.0 - log_sum_exp(z), 1e-12);
  EXPECT_NEAR(row.entropy, entropy_of(z), 1e-12);
  EXPECT_FALSE(row.bad_target);
}

TEST(ReferenceLogp, BiasAndTemperatureEnterAsTheOpDefinesThem) {
  LogpProblem p = three_logits();
  p.bias_values = {0.5f, -1.0f, 0.25f};
  p.temperature = 0.5;
  const LogpRow row = reference_logp_row(p, 0);
  const std::vector<double> z{(1 + 0.5) / 0.5, (2 - 1.0) / 0.5, (3 + 0.25) / 0.5};
  EXPECT_NEAR(row.lse, log_sum_exp(z), 1e-12);
  EXPECT_NEAR(row.logp, z[1] - log_sum_exp(z), 1e-12);
  EXPECT_NEAR(row.entropy, entropy_of(z), 1e-12);
}

TEST(ReferenceLogp, PaddingColumnsAreLeftOut) {
  LogpProblem p = three_logits();
  p.valid_vocab = 2;  // the weight's third row is padding
  const LogpRow row = reference_logp_row(p, 0);
  EXPECT_NEAR(row.lse, log_sum_exp({1, 2}), 1e-12);
  EXPECT_NEAR(row.logp, 2.0 - log_sum_exp({1, 2}), 1e-12);
}

TEST(ReferenceLogp, IgnoredAndOutOfRangeTargets) {
  LogpProblem p = three_logits();
  p.targets = {p.ignore_index};
  LogpRow row = reference_logp_row(p, 0);
  EXPECT_EQ(row.logp, 0.0);
  EXPECT_FALSE(row.bad_target);
  EXPECT_NEAR(row.lse, log_sum_exp({1, 2, 3}), 1e-12);  // lse and entropy are still defined
  for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{3}}) {
    p.targets = {bad};
    row = reference_logp_row(p, 0);
    EXPECT_TRUE(row.bad_target) << bad;
    EXPECT_TRUE(std::isnan(row.logp)) << bad;
  }
}

TEST(ReferenceLogp, LargeLogitsDoNotOverflow) {
  LogpProblem p = three_logits();
  p.weight_values = {1000.0f, 1000.0f, -1000.0f};
  const LogpRow row = reference_logp_row(p, 0);
  EXPECT_NEAR(row.lse, 1000.0 + std::log(2.0), 1e-9);
  EXPECT_NEAR(row.logp, -std::log(2.0), 1e-12);
  EXPECT_NEAR(row.entropy, std::log(2.0), 1e-12);
}

// L = sum_i g_i logp_i + h_i lse_i from the forward reference, differentiated numerically.
double loss(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
            const std::vector<float>& e) {
  double sum = 0;
  for (std::int64_t i = 0; i < p.n; ++i) {
    const LogpRow row = reference_logp_row(p, i);
    const auto r = static_cast<std::size_t>(i);
    sum += g[r] * row.logp + h[r] * row.lse + (e.empty() ? 0.0 : e[r] * row.entropy);
  }
  return sum;
}

// The central difference of the loss in one input value, which is nudged by +-step and restored.
double numeric_derivative(LogpProblem& p, float& value, const std::vector<float>& g, const std::vector<float>& h,
                          const std::vector<float>& e = {}) {
  const float saved = value;
  const float step = 1.0f / 1024;
  const float above = saved + step, below = saved - step;  // the values as stored, rounded
  value = above;
  const double up = loss(p, g, h, e);
  value = below;
  const double down = loss(p, g, h, e);
  value = saved;
  return (up - down) / (static_cast<double>(above) - static_cast<double>(below));
}

// A problem of three rows (the second ignored) with bias and temperature, fp32 values drawn from
// seeds first_seed .. first_seed + 2, X and W within +-scale.
LogpProblem small_problem(std::uint64_t first_seed, float scale) {
  LogpProblem p;
  p.n = 3;
  p.hidden = 4;
  p.vocab_local = 5;
  p.valid_vocab = 5;
  p.temperature = 0.8;
  std::vector<std::uint8_t> bytes;
  p.hidden_values = random_values(first_seed, 12, scale, DType::kFP32, bytes);
  p.weight_values = random_values(first_seed + 1, 20, scale, DType::kFP32, bytes);
  p.bias_values = random_values(first_seed + 2, 5, 0.5f, DType::kFP32, bytes);
  p.targets = {4, p.ignore_index, 0};
  return p;
}

TEST(ReferenceGradients, MatchFiniteDifferencesOfTheForward) {
  LogpProblem p = small_problem(11, 1.0f);
  const std::vector<float> g{0.7f, -1.3f, 0.4f}, h{0.2f, 0.9f, -0.6f};
  const ReferenceGrads grads = reference_gradients(p, g, h);
  ASSERT_EQ(grads.dx.size(), 12u);
  ASSERT_EQ(grads.dw.size(), 20u);
  ASSERT_EQ(grads.db.size(), 5u);
  // A row without a valid target has no gradient at all (its upstream gradients are ignored).
  for (std::size_t k = 4; k < 8; ++k) EXPECT_EQ(grads.dx[k], 0.0) << k;
  const std::vector<float> g_live{0.7f, 0.0f, 0.4f}, h_live{0.2f, 0.0f, -0.6f};
  for (std::size_t k = 0; k < 12; ++k) {
    if (k >= 4 && k < 8) continue;
    EXPECT_NEAR(grads.dx[k], numeric_derivative(p, p.hidden_values[k], g_live, h_live), 1e-5) << "dX " << k;
  }
  for (std::size_t k = 0; k < 20; ++k) {
    EXPECT_NEAR(grads.dw[k], numeric_derivative(p, p.weight_values[k], g_live, h_live), 1e-5) << "dW " << k;
  }
  for (std::size_t k = 0; k < 5; ++k) {
    EXPECT_NEAR(grads.db[k], numeric_derivative(p, p.bias_values[k], g_live, h_live), 1e-5) << "db " << k;
  }
}


// Every gradient of `grads` against the finite differences of the loss with g, h and e.
void expect_finite_differences(LogpProblem& p, const ReferenceGrads& grads, const std::vector<float>& g,
                               const std::vector<float>& h, const std::vector<float>& e) {
  for (std::size_t k = 0; k < grads.dx.size(); ++k) {
    EXPECT_NEAR(grads.dx[k], numeric_derivative(p, p.hidden_values[k], g, h, e), 1e-5) << "dX " << k;
  }
  for (std::size_t k = 0; k < grads.dw.size(); ++k) {
    EXPECT_NEAR(grads.dw[k], numeric_derivative(p, p.weight_values[k], g, h, e), 1e-5) << "dW " << k;
  }
  for (std::size_t k = 0; k < grads.db.size(); ++k) {
    EXPECT_NEAR(grads.db[k], numeric_derivative(p, p.bias_values[k], g, h, e), 1e-5) << "db " << k;
  }
}

TEST(ReferenceGradients, TheEntropyTermMatchesFiniteDifferences) {
  LogpProblem p = small_problem(21, 1.5f);
  const std::vector<float> zero(3, 0.0f), e{-0.9f, 0.0f, 1.7f};
  // The ignored row's upstream gradients are ignored, so the loss leaves it out too.
  const ReferenceGrads alone = reference_gradients(p, zero, zero, {-0.9f, 5.0f, 1.7f}, {});
  for (std::size_t k = 4; k < 8; ++k) EXPECT_EQ(alone.dx[k], 0.0) << k;
  double largest = 0.0;
  for (double v : alone.dx) largest = std::max(largest, std::abs(v));
  EXPECT_GT(largest, 1e-2) << "the entropy term alone moves the gradients";
  expect_finite_differences(p, alone, zero, zero, e);

  const std::vector<float> g{0.7f, 0.0f, 0.4f}, h{0.2f, 0.0f, -0.6f};
  const ReferenceGrads combined = reference_gradients(p, g, h, e, {});
  expect_finite_differences(p, combined, g, h, e);
  // Without e the overload of two gradients gives the same as an empty e.
  const ReferenceGrads without = reference_gradients(p, g, h);
  const ReferenceGrads empty_e = reference_gradients(p, g, h, {}, {});
  EXPECT_EQ(without.dx, empty_e.dx);
  EXPECT_NE(without.dx, combined.dx);
}

TEST(ReferenceGradients, RelNormSeesUnwrittenValues) {
  EXPECT_DOUBLE_EQ(rel_norm({1.0f, 2.0f}, {1.0, 2.0}), 0.0);
  EXPECT_NEAR(rel_norm({1.0f, 0.0f}, {0.0, 1.0}), std::sqrt(2.0), 1e-12);
  EXPECT_EQ(rel_norm({1.0f, std::numeric_limits<float>::quiet_NaN()}, {1.0, 1.0}),
            std::numeric_limits<double>::infinity());
}

}  // namespace
}  // namespace shardjit::testing
