// Merges the S softmax partials of each row (vocabulary splits of this GPU and TP ranks) into
// logp, lse and entropy, and records target ids that are out of range. One thread per row;
// sources are visited in the fixed order 0..S-1, so every rank gets bit-identical results.
//
// Launch: kLogpCombineThreads threads per block, ceil(n_rows / kLogpCombineThreads) blocks.
#pragma once

#include "common/math.cuh"
#include "linear_logp/combine_args.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

constexpr int kLogpCombineThreads = 256;

template <int S, class TargetT, bool ENTROPY>
__global__ void __launch_bounds__(kLogpCombineThreads)
    logp_combine(const LogpCombineArgs args) {
  static_assert(S >= 1 && S <= 1024, "S is in [1, 1024]");
  const long long row = static_cast<long long>(blockIdx.x) * kLogpCombineThreads + threadIdx.x;
  if (row >= args.n_rows) return;
  const RowPartial* const parts = args.partials + row;
  const long long stride = args.source_stride;

  // Two passes, so each source is rescaled once against the global max rather than repeatedly
  // against a running one.
  float m = neg_inf();
  float target = neg_inf();
#pragma unroll 8
  for (int s = 0; s < S; ++s) {
    m = fmaxf(m, parts[s * stride].max);
    target = fmaxf(target, parts[s * stride].target);
  }
  float sum = 0.0f;
  float ent = 0.0f;
  if (m != neg_inf()) {
#pragma unroll 8
    for (int s = 0; s < S; ++s) {
      const RowPartial p = parts[s * stride];
      if (p.max == neg_inf()) continue;
      const float shift = p.max - m;
      const float scale = expf(shift);
      sum += p.sum * scale;
      if (ENTROPY) ent += scale * (p.ent + shift * p.sum);
    }
  }

  // An empty row (no valid column anywhere) gets lse = -inf and entropy 0 rather than NaN.
  const float log_sum = logf(sum);
  const float lse = m != neg_inf() ? m + log_sum : neg_inf();
  const long long t = static_cast<long long>(static_cast<const TargetT*>(args.targets)[row]);
  float logp;
  if (t == args.ignore_index) {
    logp = 0.0f;
  } else if (t < 0 || t >= args.valid_vocab) {
    logp = quiet_nan();
    atomicAdd(&args.status->bad_rows, 1u);
    if (atomicCAS(&args.status->claimed, 0u, 1u) == 0u) args.status->first_bad_id = t;
  } else {
    logp = target - lse;
  }
  if (args.logp != nullptr) args.logp[row] = logp;
  if (args.lse != nullptr) args.lse[row] = lse;
  if (ENTROPY) {
    if (args.entropy != nullptr) {
      args.entropy[row] = m != neg_inf() ? log_sum - ent / sum : 0.0f;
    }
  }
}

}  // namespace kernels
}  // namespace shardjit
