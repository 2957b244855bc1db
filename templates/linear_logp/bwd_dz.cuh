// Backward of LinearLogp, first step: for a BM-row tile of X and a BN-column tile of one
// vocabulary chunk, recompute the logits z = (X W^T + b) / T exactly as the forward does (same
// main loops, same fp32 logit tile in shared memory), then write dZ, the gradient with respect
// to X W^T + b, to the chunk's buffer (templates/linear_logp/bwd_dz_epilogue.cuh). The GEMMs of
// templates/gemm/gemm.cuh then turn dZ into grad_hidden and grad_weight.
//
// Grid: x = row tiles (ceil(n_rows / BM)), y = column tiles of the chunk (ceil(chunk_cols / BN)).
// Block: linear_logp_bwd_dz_threads, dynamic shared memory
// linear_logp_bwd_dz_smem_bytes(sizeof(T), BM, BN, BK, STAGES).
//
// FILTER: a tile whose |dZ| (unscaled) all lie below filter_threshold is written as zeros and
// marked 0 in tile_mask, so that the GEMMs skip it.
#pragma once

#include "common/cp_async_tile.cuh"
#include "common/ptx.cuh"
#include "common/types.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_epilogue.cuh"
#include "linear_logp/bwd_dz_layout.cuh"
#include "linear_logp/fwd_mainloop_mma.cuh"
#include "linear_logp/fwd_mainloop_simt.cuh"

namespace shardjit {
namespace kernels {

// The forward's main loops: tensor cores for 16-bit inputs, exact fp32 FMA for fp32.
template <class T, int BM, int BN, int BK>
struct BwdDzMainloop {
  using type = MmaMainloop<T, BM, BN, BK>;
};

template <int BM, int BN, int BK>
struct BwdDzMainloop<float, BM, BN, BK> {
  using type = SimtMainloop<BM, BN, BK>;
};

template <class T, class BiasT, class TargetT, class DZ, int H, int V_LOCAL, int V_VALID, int BM,
          int BN, int BK, int STAGES, bool FILTER>
__global__ void __launch_bounds__(linear_logp_bwd_dz_threads, 1)
    linear_logp_bwd_dz(const LinearLogpBwdDzArgs args) {
  static_assert(BM == 64 || BM == 128, "BM is 64 or 128");
  static_assert(BN == 64 || BN == 128, "BN is 64 or 128");
  static_assert(BK == 32 || BK == 64, "BK is 32 or 64");
  static_assert(STAGES >= 2 && STAGES <= 4, "STAGES is 2, 3 or 4");
  static_assert(H >= 8 && H % 8 == 0, "H is a positive multiple of 8");
  static_assert(V_VALID >= 0 && V_VALID <= V_LOCAL, "V_VALID is in [0, V_LOCAL]");
  static_assert(is_same_type<DZ, T>::value || is_same_type<DZ, float>::value,
                "dZ is kept in the input type or in fp32");

  constexpr int kThreads = linear_logp_bwd_dz_threads;
  constexpr int kElem = static_cast<int>(sizeof(T));
  constexpr int kKSlices = (H + BK - 1) / BK;
  constexpr int kLd = linear_logp_bwd_dz_logit_ld(BN);
  constexpr int kStageElems = (BM + BN) * BK;
  using XCopy = CpAsyncTile<T, BM, BK, H, kThreads>;
  using WCopy = CpAsyncTile<T, BN, BK, H, kThreads>;
  using Mainloop = typename BwdDzMainloop<T, BM, BN, BK>::type;
  using Epilogue = DzEpilogue<BiasT, TargetT, DZ, BM, BN, V_VALID, FILTER, kThreads>;

  extern __shared__ __align__(128) unsigned char linear_logp_bwd_dz_smem[];
  unsigned char* const smem = linear_logp_bwd_dz_smem;
  T* const ring = reinterpret_cast<T*>(smem);
  float* const logits = reinterpret_cast<float*>(smem + linear_logp_bwd_dz_logit_offset(kElem, BM, BN, BK, STAGES));
  const Epilogue epilogue{
      reinterpret_cast<BwdRow*>(smem + linear_logp_bwd_dz_rows_offset(kElem, BM, BN, BK, STAGES)),
      reinterpret_cast<unsigned int*>(smem + linear_logp_bwd_dz_max_offset(kElem, BM, BN, BK, STAGES))};

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const long long row0 = static_cast<long long>(blockIdx.x) * BM;
  const long long rows_left = args.n_rows - row0;
  const int rows = rows_left < BM ? static_cast<int>(rows_left) : BM;
  const int c0 = static_cast<int>(blockIdx.y) * BN;  // chunk column of the tile's column 0
  const int n0 = args.chunk_begin + c0;               // shard column of the same
  DZ* const out = static_cast<DZ*>(args.dz) + row0 * args.dz_stride + c0;
  unsigned char* const mask =
      FILTER ? args.tile_mask + static_cast<long long>(blockIdx.x) * gridDim.y + blockIdx.y : nullptr;

  // A tile wholly in the padding (or past the shard) has no logits to compute.
  if (n0 >= V_VALID) {
    epilogue.store(logits, kLd, c0, rows, true, args, out, warp, lane);
    if (FILTER && tid == 0) *mask = 0;
    return;
  }

  epilogue.init(args, row0, tid);  // published by the first K-loop barrier

  XCopy x_copy;
  x_copy.set_rows(static_cast<const T*>(args.hidden), args.hidden_stride, row0, args.n_rows, tid);
  WCopy w_copy;
  w_copy.set_rows(static_cast<const T*>(args.weight), args.weight_stride, n0, V_VALID, tid);
  int load_slice = 0;
  int load_slot = 0;
  // Always commits, even past the last slice, so that the group count stays in step with the
  // consumer's cp_async_wait_group.
  auto load_next = [&]() {
    if (load_slice < kKSlices) {
      const unsigned int slot = smem_addr(ring + load_slot * kStageElems);
      x_copy.issue(slot, load_slice * BK);
      w_copy.issue(slot + BM * BK * kElem, load_slice * BK);
      ++load_slice;
      load_slot = load_slot + 1 == STAGES ? 0 : load_slot + 1;
    }
    cp_async_commit_group();
  };
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) load_next();

  Mainloop mainloop;
  mainloop.clear();
  int read_slot = 0;
#pragma unroll 1
  for (int slice = 0; slice < kKSlices; ++slice) {
    cp_async_wait_group<STAGES - 2>();
    __syncthreads();
    const T* const slot = ring + read_slot * kStageElems;
    mainloop.compute(slot, slot + BM * BK, warp, lane, load_next);
    read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
  }
  cp_async_wait_group<0>();
  // The logit tile does not overlap the ring, so it may be written while other warps still
  // read their last slice.
  mainloop.store(logits, kLd, warp, lane);
  __syncthreads();
  epilogue.consume(logits, kLd, n0, c0, rows, args, out, warp, lane);

  if constexpr (FILTER) {
    __syncthreads();
    const float s = args.scale != nullptr ? *args.scale : 1.0f;
    // Compared as bits: the threshold is non-negative, and a NaN keeps its tile.
    const bool keep = *epilogue.tile_max >= __float_as_uint(args.filter_threshold * s);
    epilogue.store(logits, kLd, c0, rows, !keep, args, out, warp, lane);
    if (tid == 0) *mask = keep ? 1 : 0;
  }
}

}  // namespace kernels
}  // namespace shardjit
