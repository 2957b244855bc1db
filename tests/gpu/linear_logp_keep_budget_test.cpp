// The default keep budget (kKeepLogitsAuto) on a GPU, at sizes where its rule bites: a fresh op
// takes a whole shard of 1000 MiB of dZ as one chunk; a later call of many rows grows the
// grad_hidden accumulator, which shrinks the budget and frees that dZ buffer; from then on the
// op plans as one with a fixed budget that keeps as many chunks, bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/grad_reference.hpp"
#include "support/reference.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

Runtime& shared_runtime() {
  static Runtime runtime;  // cache folder from SHARDJIT_CACHE_DIR, shared across the suite
  return runtime;
}

// Inputs of up to max_n rows over one head, and the gradients of the latest backward.
struct Head {
  static constexpr std::int64_t h = 1024, v = 32000, max_n = 65536;
  DeviceArray x, w, t, g, logp, lse, gx, gw;

  Head()
      : x(max_n * h * 2),
        w(v * h * 2),
        t(DeviceArray::from(targets())),
        g(DeviceArray::from(upstream())),
        logp(max_n * 4),
        lse(max_n * 4),
        gx(max_n * h * 2),
        gw(v * h * 2) {
    std::vector<std::uint8_t> bytes;
    testing::random_values(71, static_cast<std::size_t>(max_n * h), 1.0f, DType::kBF16, bytes);
    x.upload(bytes.data(), bytes.size());
    testing::random_values(72, static_cast<std::size_t>(v * h), 0.125f, DType::kBF16, bytes);
    w.upload(bytes.data(), bytes.size());
  }

  static std::vector<std::int64_t> targets() {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(max_n));
    for (std::int64_t i = 0; i < max_n; ++i) ids[static_cast<std::size_t>(i)] = (i * 7919) % v;
    return ids;
  }
  static std::vector<float> upstream() {
    std::vector<float> grad(static_cast<std::size_t>(max_n));
    for (std::int64_t i = 0; i < max_n; ++i) grad[static_cast<std::size_t>(i)] = 0.5f + static_cast<float>(i % 5) * 0.25f;
    return grad;
  }

  // Forward then backward of the first n rows on `op`: grad_hidden's and grad_weight's bytes.
  std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> step(LinearLogp& op, std::int64_t n) {
    const LinearLogpInputs in{{x.data(), DType::kBF16, n, h, 0}, {w.data(), DType::kBF16, v, h, 0}, {},
                              {t.data(), DType::kInt64, n}};
    op.forward(in, {{logp.data(), DType::kFP32, n}, {lse.data(), DType::kFP32, n}, {}}, nullptr);
    LinearLogpGrads grads;
    grads.hidden = {gx.data(), DType::kBF16, n, h, 0};
    grads.weight = {gw.data(), DType::kBF16, v, h, 0};
    gx.fill_bytes(0xff);
    gw.fill_bytes(0xff);
    op.backward(in, {lse.data(), DType::kFP32, n}, {g.data(), DType::kFP32, n}, {}, grads, nullptr);
    return {gx.to_vector<std::uint8_t>(static_cast<std::size_t>(n * h * 2)), gw.to_vector<std::uint8_t>(gw.bytes())};
  }
};

LinearLogpConfig config_of(std::int64_t keep_bytes) {
  LinearLogpConfig config;
  config.hidden = Head::h;
  config.vocab_local = Head::v;
  config.want_backward = true;
  config.keep_logits_bytes = keep_bytes;
  return config;
}

// Relative norm of a - b over b, both bf16 bytes (testing::rel_norm).
double relative_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  const std::vector<float> fb = testing::to_floats(b, DType::kBF16, b.size() / 2);
  return testing::rel_norm(testing::to_floats(a, DType::kBF16, a.size() / 2),
                           std::vector<double>(fb.begin(), fb.end()));
}

TEST(LinearLogpKeepBudget, AfterTheAccumulatorGrewTheAutoBudgetIsTheFixedOneItNowGives) {
  if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  Head head;
  // 16384 rows: 1000 MiB of dZ, one chunk by the fresh op's 1 GiB. 65536 rows: an accumulator
  // of 256 MiB and a second kept chunk's band, so the budget falls to just under 512 MiB (about
  // 495) and the dZ and keep buffers' cap below 768. From then on both ops keep as many chunks
  // past the ones in place: one of 256 MiB on 132 multiprocessors (65536 rows in 16 chunks, two
  // in place; 16384 rows in four, one), two where the chunk width rule picks 224 MiB chunks on
  // fewer. 480 MiB lies in the same multiple of either width as the default's 495.
  LinearLogp auto_op(shared_runtime(), config_of(kKeepLogitsAuto));
  LinearLogp fixed(shared_runtime(), config_of(480 * kMiB));
  const auto whole = head.step(auto_op, 16384);
  const auto chunked = head.step(fixed, 16384);
  EXPECT_LT(relative_difference(whole.first, chunked.first), 2e-2) << "grad_hidden, one chunk against four";
  EXPECT_LT(relative_difference(whole.second, chunked.second), 2e-2) << "grad_weight, one chunk against four";
  EXPECT_EQ(head.step(auto_op, 65536), head.step(fixed, 65536)) << "the call that grows the accumulator";
  EXPECT_EQ(head.step(auto_op, 16384), chunked) << "the smaller budget: chunks, as the fixed one's";
  EXPECT_EQ(head.step(fixed, 16384), chunked) << "repeatable";
}

}  // namespace
}  // namespace shardjit
