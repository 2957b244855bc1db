#include "support/logp_case.hpp"

#include <limits>
#include <random>

namespace shardjit::testing {

LinearLogpConfig logp_config(const LogpCase& c) {
  LinearLogpConfig config;
  config.hidden = c.hidden;
  config.vocab_local = c.vocab;
  config.valid_vocab = c.valid_vocab;
  config.dtype = c.dtype;
  config.bias_dtype = c.bias;
  config.target_dtype = c.targets;
  config.temperature = c.temperature;
  return config;
}

LogpProblem logp_problem(const LogpCase& c) {
  LogpProblem p;
  p.n = c.n;
  p.hidden = c.hidden;
  p.vocab_local = c.vocab;
  p.valid_vocab = c.valid_vocab ? c.valid_vocab : c.vocab;
  p.temperature = c.temperature;
  return p;
}

void random_targets_and_grads(LogpProblem& p, std::uint64_t seed, std::int64_t ignore_every, std::int64_t ignore_at,
                              std::vector<float>& g, std::vector<float>& h) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> pick(0, p.valid_vocab - 1);
  std::uniform_real_distribution<float> grad(-1.0f, 1.0f);
  for (std::int64_t i = 0; i < p.n; ++i) {
    p.targets.push_back(i % ignore_every == ignore_at ? p.ignore_index : pick(rng));
    g.push_back(grad(rng));
    h.push_back(0.25f * grad(rng));
  }
  p.targets[0] = 0;
  p.targets[1] = p.valid_vocab - 1;
}

void forbid_tokens(LogpProblem& p, DType dtype, std::vector<std::uint8_t>& bytes, std::int64_t every) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::int64_t middle = p.vocab_local / 2;
  for (std::int64_t v = 0; v < p.vocab_local; ++v) {
    const bool spaced = v >= kFirstForbidden && (v - kFirstForbidden) % every == 0;
    const bool run = (v >= 256 && v < 768) || (v >= middle && v < middle + 1024);
    if (!spaced && !run) continue;
    p.bias_values[static_cast<std::size_t>(v)] =
        store_as(minus_inf, dtype, bytes.data() + v * static_cast<std::int64_t>(dtype_size(dtype)));
  }
}

}  // namespace shardjit::testing
