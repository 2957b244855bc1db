#include "support/logp_case.hpp"

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

}  // namespace shardjit::testing
