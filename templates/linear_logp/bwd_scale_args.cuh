// Arguments of the dZ scale kernel (templates/linear_logp/bwd_scale.cuh). Shared verbatim by the
// host and the kernel, so only built-in types appear here.
#pragma once

namespace shardjit {
namespace kernels {

struct LinearLogpBwdScaleArgs {
  const float* grad_logp;  // g [n_rows]; null: 0
  const float* grad_lse;   // h [n_rows]; null: 0
  const float* grad_entropy;  // e [n_rows]; null: 0
  const float* entropy;       // H [n_rows], read with grad_entropy
  float* scale;            // out [2]: s, then 1 / s
  long long n_rows;
  float inv_temperature;
};

}  // namespace kernels
}  // namespace shardjit
