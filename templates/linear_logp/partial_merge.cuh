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

// Folds (max, sum, ent) of one set into (run_max, run_sum, run_ent): in natural units, or with
// BASE2 in base 2 (maxima in units of ln 2, scales by exp2f; the forward's column fold,
// fwd_column_fold.cuh).
template <bool ENTROPY, bool BASE2 = false>
__device__ __forceinline__ void merge_stats(float& run_max, float& run_sum, float& run_ent, float max, float sum,
                                            float ent) {
  const float m = fmaxf(run_max, max);
  if (m == neg_inf()) return;
  auto scale_of = [](float shift) { return BASE2 ? exp2f(shift) : expf(shift); };
  float merged_sum = 0.0f;
  float merged_ent = 0.0f;
  if (run_max != neg_inf()) {
    const float shift = run_max - m;
    const float scale = scale_of(shift);
    merged_sum = run_sum * scale;
    if (ENTROPY) merged_ent = scale * (run_ent + shift * run_sum);
  }
  if (max != neg_inf()) {
    const float shift = max - m;
    const float scale = scale_of(shift);
    merged_sum += sum * scale;
    if (ENTROPY) merged_ent += scale * (ent + shift * sum);
  }
  run_max = m;
  run_sum = merged_sum;
  run_ent = merged_ent;
}

// Folds (max, sum, ent) of one set into `run`; the target field is left alone.
template <bool ENTROPY>
__device__ __forceinline__ void merge_stats(RowPartial& run, float max, float sum, float ent) {
  merge_stats<ENTROPY>(run.max, run.sum, run.ent, max, sum, ent);
}

}  // namespace kernels
}  // namespace shardjit
