// `shardjit-bench linear-logp`: the fused forward against a cuBLAS GEMM of the same shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu_timer.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit::bench {

struct LinearLogpCase {
  std::string name;
  std::int64_t n = 0, hidden = 0, vocab = 0;
  DType dtype = DType::kBF16;
  bool entropy = false;
  bool backward = false;  // time forward + backward instead of the forward alone
  std::int64_t keep_logits_bytes = LinearLogpConfig{}.keep_logits_bytes;
  std::int64_t valid_vocab = 0;  // 0: every row a token; else rows at or past it are padding (not targets)
};

// The tp=1 cases of shapes.json.
std::vector<LinearLogpCase> load_linear_logp_cases(const std::string& shapes_path);

// Runs one case and returns its JSON row (the caller prints it). Its device memory is freed when
// it returns or throws.
nlohmann::json run_linear_logp_case(const LinearLogpCase& c, const TimingOptions& timing);

}  // namespace shardjit::bench
