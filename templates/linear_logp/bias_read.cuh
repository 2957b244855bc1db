// A bias entry as the kernels read it. A bias of -inf forbids its token (a mask folded into the
// bias), but every fold and the dZ epilogue take z as finite: a forbidden token's probability is
// 0, and 0 * -inf in the entropy's p * z or dZ's p * (z - ...) would be NaN. So an entry below
// the floor is read as the floor, whose z (about kForbiddenLogit) is finite yet still has
// probability 0 beside any real logit. A NaN entry stays NaN, so bad input still shows.
//
// The floor is a power of two, so that the folds' products of it, by 1 / T and by log2(e) / T,
// are exact: a fold takes each term as exp2(acc * scale - round(max * scale)), and where every
// column a thread holds in a tile is forbidden, acc and max are both the floor. With an inexact
// product that difference is the product's rounding error, about 1e22 and often positive: a term
// of +inf and a NaN row. With an exact one it is 0, and the tile's terms merge away to nothing
// beside any real logit's.
#pragma once

#include "common/types.cuh"

namespace shardjit {
namespace kernels {

// The z of a forbidden token: finite, and far below any logit an fp32 row can hold beside it.
constexpr float kForbiddenLogit = -1e30f;

// The bias floor for a temperature: -1e30 T, its magnitude rounded down to a power of two and at
// most 2^127 (the -inf of an overflowed quotient included), so that (acc + floor) * inv_temperature
// is exact and between kForbiddenLogit and half of it for every temperature up to about 1e8 (above,
// the cap keeps it finite: -2^127 / T). acc, a real logit times T, is below half the floor's ulp
// (about 3e22 T: for T above about 1e-20), so acc + floor is the floor.
__device__ __forceinline__ float bias_floor(float inv_temperature) {
  constexpr float kLowestPowerOfTwo = -1.7014118346046923e38f;  // -2^127
  const float lowest = kForbiddenLogit / inv_temperature;
  const float capped = lowest < kLowestPowerOfTwo ? kLowestPowerOfTwo : lowest;
  return __int_as_float(__float_as_int(capped) & static_cast<int>(0xff800000u));  // sign and exponent
}

// bias[i] as a float, no lower than `lowest` (bias_floor).
template <class BiasT>
__device__ __forceinline__ float read_bias(const void* bias, long long i, float lowest) {
  const float b = to_float(static_cast<const BiasT*>(bias)[i]);
  return b < lowest ? lowest : b;
}

}  // namespace kernels
}  // namespace shardjit
