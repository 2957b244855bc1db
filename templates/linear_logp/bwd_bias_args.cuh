// Arguments of the bias-gradient kernel (templates/linear_logp/bwd_bias.cuh). Shared verbatim by
// the host and the kernel, so only built-in types appear here.
#pragma once

namespace shardjit {
namespace kernels {

struct LinearLogpBwdBiasArgs {
  const void* dz;         // [n_rows][dz_stride] of the kernel's dZ type
  void* out;              // [cols] of the kernel's output type: grad_bias of the chunk
  const void* addend;     // [cols] of the output type, added; null: none; may equal out
  const float* alpha;     // device scalar the column sums are multiplied by; null: 1
  long long n_rows;
  long long dz_stride;    // a multiple of 8
  int cols;
};

}  // namespace kernels
}  // namespace shardjit
