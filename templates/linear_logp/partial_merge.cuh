// Merging of softmax statistics of two disjoint column sets (see RowPartial), each relative to
// its own max. An empty set (max = -inf) contributes nothing, and is tested for explicitly:
// its scale exp(-inf - M) is 0 but its shifted entropy term (-inf) * 0 would be NaN.
#pragma once

#include "common/math.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// The statistics of an empty column set: the identity of merge_stats and of the combine.
__device__ __forceinline__ RowPartial empty_partial() {
  RowPartial empty;
  empty.max = neg_inf();
  empty.sum = 0.0f;
  empty.ent = 0.0f;
  empty.target = neg_inf();
  return empty;
}

// Writes empty partials for the rows [row0, row0 + rows) that exist (below n_rows), `threads`
// threads striding from `tid`.
__device__ __forceinline__ void store_empty_partials(RowPartial* out, long long row0, long long n_rows, int rows,
                                                     int tid, int threads) {
  for (int r = tid; r < rows; r += threads) {
    if (row0 + r < n_rows) out[row0 + r] = empty_partial();
  }
}

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
