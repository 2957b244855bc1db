// Merging of softmax statistics of two disjoint column sets (see RowPartial), each relative to
// its own max. An empty set (max = -inf) contributes nothing, and is tested for explicitly:
// its scale exp(-inf - M) is 0 but its shifted entropy term (-inf) * 0 would be NaN.
#pragma once

#include "common/math.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// Folds (max, sum, ent) of one set into `run`; the target field is left alone.
template <bool ENTROPY>
__device__ __forceinline__ void merge_stats(RowPartial& run, float max, float sum, float ent) {
  const float m = fmaxf(run.max, max);
  if (m == neg_inf()) return;
  float merged_sum = 0.0f;
  float merged_ent = 0.0f;
  if (run.max != neg_inf()) {
    const float shift = run.max - m;
    const float scale = expf(shift);
    merged_sum = run.sum * scale;
    if (ENTROPY) merged_ent = scale * (run.ent + shift * run.sum);
  }
  if (max != neg_inf()) {
    const float shift = max - m;
    const float scale = expf(shift);
    merged_sum += sum * scale;
    if (ENTROPY) merged_ent += scale * (ent + shift * sum);
  }
  run.max = m;
  run.sum = merged_sum;
  run.ent = merged_ent;
}

}  // namespace kernels
}  // namespace shardjit
