// A bias entry as the kernels read it. A bias of -inf forbids its token (a mask folded into the
// bias), but every fold and the dZ epilogue take z as finite: a forbidden token's probability is
// 0, and 0 * -inf in the entropy's p * z or dZ's p * (z - ...) would be NaN. So an entry below
// the floor is read as the floor, whose z (about kForbiddenLogit) is finite yet still has
// probability 0 beside any real logit. A NaN entry stays NaN, so bad input still shows.
#pragma once

#include "common/types.cuh"

namespace shardjit {
namespace kernels {

// The z of a forbidden token: finite, and far below any logit an fp32 row can hold beside it.
constexpr float kForbiddenLogit = -1e30f;

// The bias floor for a temperature: (acc + floor) * inv_temperature is about kForbiddenLogit,
// and the floor itself stays finite at any temperature.
__device__ __forceinline__ float bias_floor(float inv_temperature) {
  constexpr float kLowestFinite = -3.0e38f;
  const float lowest = kForbiddenLogit / inv_temperature;
  return lowest < kLowestFinite ? kLowestFinite : lowest;
}

// bias[i] as a float, no lower than `lowest` (bias_floor).
template <class BiasT>
__device__ __forceinline__ float read_bias(const void* bias, long long i, float lowest) {
  const float b = to_float(static_cast<const BiasT*>(bias)[i]);
  return b < lowest ? lowest : b;
}

}  // namespace kernels
}  // namespace shardjit
