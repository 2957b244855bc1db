// The bias of a finished tile on the Hopper main loop, added in the wgmma accumulators (two rows
// and BN / 4 columns a thread, WgmmaTileMainloop's fragment layout): what the forward's fold, the
// dZ epilogue and the kept chunk's epilogue each do first.
#pragma once

#include "linear_logp/bias_read.cuh"

namespace shardjit {
namespace kernels {

// Adds the bias of the tile's columns in column groups [first, first + count) to both rows; the
// tile's column 0 is shard column n0, and columns at or past valid_cols get nothing (their bias
// may not exist). A forbidden token's -inf is read as the floor for inv_temperature (bias_read.cuh).
template <class BiasT, class Mainloop>
__device__ __forceinline__ void add_fragment_bias(float* acc, int first, int count, int n0, int valid_cols,
                                                  const void* bias, float inv_temperature, int lane) {
  const float bias_min = bias_floor(inv_temperature);
#pragma unroll
  for (int g = first; g < first + count; ++g)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = Mainloop::fragment_col(lane, g, e);
      const float b = col < valid_cols ? read_bias<BiasT>(bias, n0 + col, bias_min) : 0.0f;
      acc[4 * g + e] += b;
      acc[4 * g + 2 + e] += b;
    }
}

}  // namespace kernels
}  // namespace shardjit
