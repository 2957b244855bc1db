#include "support/logp_case.hpp"

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

}  // namespace shardjit::testing
