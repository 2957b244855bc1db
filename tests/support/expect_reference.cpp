#include "support/expect_reference.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace shardjit::testing {

void expect_outputs_match_reference(const LogpProblem& p, const std::vector<float>& logp, const std::vector<float>& lse,
                                    const std::vector<float>& entropy, const std::string& label) {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(p.n));
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);
  const std::vector<LogpRow> ref = reference_logp_rows(p, rows);
  double max_logp = 0, max_lse = 0, max_entropy = 0, err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(std::isfinite(logp[i]) && std::isfinite(lse[i])) << label << ": row " << i << " not written";
    if (p.targets[i] == p.ignore_index) {
      EXPECT_EQ(logp[i], 0.0f) << label << ": ignored row " << i;
    }
    const double d = logp[i] - ref[i].logp;
    max_logp = std::max(max_logp, std::abs(d));
    max_lse = std::max(max_lse, std::abs(lse[i] - ref[i].lse));
    if (!entropy.empty()) max_entropy = std::max(max_entropy, std::abs(entropy[i] - ref[i].entropy));
    err2 += d * d;
    ref2 += ref[i].logp * ref[i].logp;
  }
  const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  std::printf("[ accuracy ] %s: max|dlogp| %.3e max|dlse| %.3e max|dH| %.3e rel-norm(logp) %.3e\n", label.c_str(),
              max_logp, max_lse, max_entropy, rel);
  EXPECT_LT(max_logp, 2e-3) << label;
  EXPECT_LT(max_lse, 2e-3) << label;
  EXPECT_LT(max_entropy, 2e-3) << label;
  EXPECT_LT(rel, 1e-3) << label;
}

void expect_grads_match_reference(const LogpProblem& p, const std::vector<float>& g, const std::vector<float>& h,
                                  DType dtype, const WrittenGrads& grads, const std::string& label) {
  const ReferenceGrads ref = reference_gradients(p, g, h);
  const auto n = static_cast<std::size_t>(p.n), H = static_cast<std::size_t>(p.hidden),
             V = static_cast<std::size_t>(p.vocab_local);
  const GradDtypes& d = grads.dtypes;
  const double dx = rel_norm(to_floats(grads.hidden, d.hidden, n * H), ref.dx);
  const double dw = rel_norm(to_floats(grads.weight, d.weight, V * H), ref.dw);
  const double db = grads.bias ? rel_norm(to_floats(*grads.bias, d.bias, V), ref.db) : 0.0;
  std::printf("[ accuracy ] %s backward rel-norm dX %.2e dW %.2e db %.2e\n", label.c_str(), dx, dw, db);
  EXPECT_LT(dx, grad_tolerance(dtype, d.hidden)) << label << ": grad_hidden";
  EXPECT_LT(dw, grad_tolerance(dtype, d.weight)) << label << ": grad_weight";
  EXPECT_LT(db, grad_tolerance(dtype, d.bias)) << label << ": grad_bias";
}

}  // namespace shardjit::testing
