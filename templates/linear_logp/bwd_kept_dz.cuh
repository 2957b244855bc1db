// The backward's first chunk when the forward kept it (fwd_keep.cuh, or the forward kernel's tiles
// of the rows as N: fwd_column_keep.cuh): the kept logits, fp16 z - m with m the row's max over
// the column tile (the max of the tile's partial), are turned into dZ in place, by the formula of
// the dZ kernel (bwd_dz_epilogue.cuh):
//   dZ[i][v] = s / T * (g_i [v = t_i] + (h_i - g_i) p_iv - e_i p_iv (z_iv - (lse_i - H_i))),
//   p_iv = exp(z_iv - lse_i),   z_iv = kept + m,
// zeros at columns in the shard's padding (from args.valid_local) or past the chunk (up to the
// next multiple of 8), for ignored rows and rows whose target is out of range. dZ has the kept
// values' size (16 bits), so each thread reads and writes the same 16 bytes. A kept -inf (a logit
// more than 65504 below m, a forbidden token's among them) is read as -65504: its term is 0 either
// way, and the entropy's p (z - ...) would otherwise be 0 * inf.
//
// Parameters: the dZ kernel's arguments (LinearLogpBwdDzArgs) of chunk 0, with tile_partials the
// kept chunk's partials, BN columns a tile (only their max is read). Grid: n_rows x
// linear_logp_bwd_kept_dz_row_blocks blocks (bwd_dz_layout.cuh), block y of a row taking its
// columns' passes y, y + gridDim.y, ...; block: linear_logp_bwd_kept_dz_threads threads.
#pragma once

#include "common/host_device.cuh"
#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"

namespace shardjit {
namespace kernels {

template <class TargetT, class DZ, int BN>
__global__ void __launch_bounds__(linear_logp_bwd_kept_dz_threads) linear_logp_bwd_kept_dz(const LinearLogpBwdDzArgs args) {
  static_assert(sizeof(DZ) == 2, "dZ in place of the kept fp16 values");
  static_assert(BN % 8 == 0, "eight columns of one tile a thread");
  const long long row = blockIdx.x;
  const BwdRow r = bwd_row(read_bwd_row_inputs<TargetT>(args, row), args, read_bwd_scale(args), args.valid_local);
  const int limit = r.target == kBwdNoGradient ? 0 : min_int(args.valid_local - args.chunk_begin, args.chunk_cols);
  const int target_col = r.target - args.chunk_begin;  // r.target < 0: no column
  const int padded = dz_padded_cols(args);
  const bool entropy = bwd_has_entropy(args);
  const float coef_u = r.coef_z * kBwdLn2;
  DZ* const out = static_cast<DZ*>(args.dz) + row * args.dz_stride;
  const int step = static_cast<int>(gridDim.y) * kKeptDzBlockCols;
  for (int c = static_cast<int>(blockIdx.y) * kKeptDzBlockCols + static_cast<int>(threadIdx.x) * 8; c < padded;
       c += step) {
    // Eight columns past the ones with a gradient read nothing: a forward that kept the chunk in
    // its own tiles (fwd_column_keep.cuh) leaves the tiles wholly in the shard's padding unwritten.
    if (c >= limit) {
      *reinterpret_cast<uint4*>(out + c) = make_uint4(0u, 0u, 0u, 0u);
      continue;
    }
    const uint4 kept = *reinterpret_cast<const uint4*>(out + c);
    const float m = args.tile_partials[static_cast<long long>(c / BN) * args.n_rows + row].max;
    const float offset = (m - r.lse) * kLog2e;
    const unsigned int words[4] = {kept.x, kept.y, kept.z, kept.w};
    unsigned int packed[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      float v[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = c + 2 * w + e;
        const float d = fmaxf(to_float(fp16{static_cast<unsigned short>(words[w] >> (16 * e))}), -kFp16Max);
        const float u = fmaf(d, kLog2e, offset);  // (z - lse) log2(e)
        float dz = (entropy ? fmaf(coef_u, u, r.coef_p) : r.coef_p) * exp2_approx(u);
        if (col == target_col) dz += r.coef_t;
        v[e] = col < limit ? dz : 0.0f;
      }
      packed[w] = pack_pair<DZ>(v[0], v[1]);
    }
    *reinterpret_cast<uint4*>(out + c) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
}

}  // namespace kernels
}  // namespace shardjit
