// dZ epilogue of linear_logp_bwd_dz on the portable main loops: the finished tile is handed over
// through the fp32 logit tile [BM][ld] in shared memory, COLS columns at a time, and each chunk
// is turned into the gradient with respect to the logits before the temperature,
//
//   dZ[i][v] = s / T * (g_i [v = t_i] + (h_i - g_i) p_iv - e_i p_iv (z_iv - (lse_i - H_i))),
//   p_iv = exp(z_iv - lse_i),
//
// (e = grad_entropy and H the entropy, where the call passes them; BwdRow says how the terms are
// grouped) and writes it to the chunk's dZ buffer. Zero for padding columns (at or past V_VALID), columns
// past the chunk, ignored rows and rows whose target is out of range. s is the storage scale.
//
// Row r of the tile belongs to warp r % WARPS; a lane owns COLS / 32 adjacent columns and writes
// them with one vector store, so a warp writes a row's COLS values in one go.
//
// FILTER: consume also records the largest |dZ| of everything it wrote since init; when the
// whole block tile (all its chunks) lies below the threshold, consume_tile overwrites what was
// written with zeros (store_zeros, by the same threads, so in program order).
#pragma once

#include "common/math.cuh"
#include "common/types.cuh"
#include "linear_logp/bias_read.cuh"
#include "linear_logp/bwd_dz_args.cuh"
#include "linear_logp/bwd_dz_layout.cuh"

namespace shardjit {
namespace kernels {

template <int N>
__device__ __forceinline__ void store_dz(float* p, const float (&v)[N]) {
  if constexpr (N == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  }
}

template <class T, int N>
__device__ __forceinline__ void store_dz(T* p, const float (&v)[N]) {
  const unsigned int lo = pack_pair<T>(v[0], v[1]);
  if constexpr (N == 4) {
    *reinterpret_cast<uint2*>(p) = make_uint2(lo, pack_pair<T>(v[2], v[3]));
  } else {
    *reinterpret_cast<unsigned int*>(p) = lo;
  }
}

constexpr int kBwdNoGradient = -2;

// ln 2: the epilogues that take exp2 of (z - lse) log2(e) turn it back into z - lse for coef_z.
constexpr float kBwdLn2 = 0.6931471805599453f;

// Row i's inputs as read from memory, none of them looked at yet. The reads depend only on i,
// so a kernel can issue them when a tile starts and derive the row (bwd_row) after the tile's
// products: the reads' latency then passes under the products instead of delaying the first
// of them, as a target read and a branch on it would.
struct BwdRowInputs {
  long long target;  // the row's global target id; -1 for a row past n_rows
  float g;           // grad_logp[i]
  float h;           // grad_lse[i]
  float lse;
  float e;           // grad_entropy[i]
  float entropy;     // H_i (read with grad_entropy only)
};

template <class TargetT>
__device__ __forceinline__ BwdRowInputs read_bwd_row_inputs(const LinearLogpBwdDzArgs& args, long long i) {
  if (i >= args.n_rows) return BwdRowInputs{-1, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const bool entropy = args.grad_entropy != nullptr;
  return BwdRowInputs{static_cast<long long>(static_cast<const TargetT*>(args.targets)[i]),
                      args.grad_logp != nullptr ? args.grad_logp[i] : 0.0f,
                      args.grad_lse != nullptr ? args.grad_lse[i] : 0.0f,
                      args.lse[i],
                      entropy ? args.grad_entropy[i] : 0.0f,
                      entropy ? args.entropy[i] : 0.0f};
}

// Whether the call has an entropy term (the same for every thread of the launch).
__device__ __forceinline__ bool bwd_has_entropy(const LinearLogpBwdDzArgs& args) {
  return args.grad_entropy != nullptr;
}

// The storage scale s, read as the row inputs are.
__device__ __forceinline__ float read_bwd_scale(const LinearLogpBwdDzArgs& args) {
  return args.scale != nullptr ? *args.scale : 1.0f;
}

// What the epilogues need of a row, from its inputs; s is the storage scale, valid_local the
// shard's columns with logits (V_VALID, or args.valid_local in the kernels not specialized for it).
__device__ __forceinline__ BwdRow bwd_row(const BwdRowInputs& in, const LinearLogpBwdDzArgs& args, float s,
                                          int valid_local) {
  BwdRow row{0.0f, 0.0f, 0.0f, 0.0f, kBwdNoGradient};
  const long long t = in.target;
  if (t != args.ignore_index && t >= 0 && t < args.valid_vocab) {
    row.lse = in.lse;
    row.coef_t = in.g * s * args.inv_temperature;
    // -e p (z - (lse - H)) = p (-e H) + p (-e) (z - lse): the entropy's share of coef_p, and coef_z.
    row.coef_p = fmaf(-in.e, in.entropy, in.h - in.g) * s * args.inv_temperature;
    row.coef_z = -in.e * s * args.inv_temperature;
    const long long col = t - args.vocab_start;
    row.target = col >= 0 && col < valid_local ? static_cast<int>(col) : -1;
  }
  return row;
}

// The columns of the dZ buffer a chunk writes: up to the next multiple of 8 (zeros past the
// chunk), so that the GEMMs read whole 16-byte chunks.
__device__ __forceinline__ int dz_padded_cols(const LinearLogpBwdDzArgs& args) { return (args.chunk_cols + 7) & ~7; }

// FILTER: folds the warp's largest |dZ| (as bits: non-negative floats order as integers, and a
// NaN is larger than every number) into the tile's.
__device__ __forceinline__ void fold_tile_max(unsigned int* tile_max, unsigned int local_max, int lane) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned int other = __shfl_xor_sync(0xffffffffu, local_max, offset);
    local_max = other > local_max ? other : local_max;
  }
  if (lane == 0) atomicMax(tile_max, local_max);
}

// FILTER: whether a tile whose largest |dZ| has the bits tile_max keeps its values: compared as
// bits, since the threshold is non-negative, and a NaN keeps its tile.
__device__ __forceinline__ bool dz_tile_kept(unsigned int tile_max, const LinearLogpBwdDzArgs& args) {
  const float s = read_bwd_scale(args);
  return tile_max >= __float_as_uint(args.filter_threshold * s);
}

template <class BiasT, class TargetT, class DZ, int BM, int BN, int COLS, int V_VALID, bool FILTER, int THREADS>
struct DzEpilogue {
  static constexpr int kChunks = BN / COLS;
  static constexpr int kLd = linear_logp_bwd_dz_logit_ld(COLS);
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kRowsPerWarp = BM / kWarps;
  static constexpr int kColsPerLane = COLS / 32;
  static constexpr bool kBias = !is_same_type<BiasT, NoBias>::value;
  static_assert(BM % kWarps == 0, "rows must split evenly over warps");
  static_assert(kColsPerLane == 2 || kColsPerLane == 4, "a lane owns a float2 or a float4");

  float* logits;           // [BM][kLd]
  BwdRow* rows;            // [BM]
  unsigned int* tile_max;  // FILTER: bits of the largest |dZ| (non-negative floats order as integers)

  // The ring is not written: the logit tile has its own region.
  static constexpr int kStagingBytes = 0;

  // `region`: the epilogue's part of shared memory (templates/linear_logp/bwd_dz_layout.cuh).
  __device__ DzEpilogue(unsigned char* /*ring*/, unsigned char* region)
      : logits(reinterpret_cast<float*>(region)),
        rows(reinterpret_cast<BwdRow*>(region + linear_logp_bwd_dz_rows_offset(BM, BN))),
        tile_max(reinterpret_cast<unsigned int*>(region + linear_logp_bwd_dz_max_offset(BM, BN))) {}

  __device__ __forceinline__ void init(const LinearLogpBwdDzArgs& args, long long row0, int tid) const {
    const float s = read_bwd_scale(args);
    for (int r = tid; r < BM; r += THREADS) {
      rows[r] = bwd_row(read_bwd_row_inputs<TargetT>(args, row0 + r), args, s, V_VALID);
    }
    if (FILTER && tid == 0) *tile_max = 0u;
  }

  // Turns the finished tile whose column 0 is shard column n0 (chunk column c0) into dZ for its
  // first `n` rows, written to `out` (the dZ of row 0, column c0), chunk by chunk through the
  // logit tile. The logit tile does not overlap the ring, so chunk 0 may be written while other
  // warps still read their last slice; a later chunk waits for the one before. With FILTER, a
  // tile whose |dZ| all lie below the threshold is then overwritten with zeros; returns whether
  // it was not. Every thread of the block calls it (it synchronizes the block).
  template <class Mainloop>
  __device__ __forceinline__ bool consume_tile(Mainloop& mainloop, int n0, int c0, int n, const LinearLogpBwdDzArgs& args,
                                               DZ* out, int warp, int lane) const {
    static_assert(Mainloop::kSlicesInFlight == 0, "the tile is read from the accumulators once its products are done");
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      if (chunk > 0) __syncthreads();
      mainloop.template store_columns<COLS>(logits, kLd, chunk, warp, lane);
      __syncthreads();
      consume(logits, kLd, n0 + chunk * COLS, c0 + chunk * COLS, n, args, out + chunk * COLS, warp, lane);
    }
    bool keep = true;
    if constexpr (FILTER) {
      __syncthreads();
      keep = dz_tile_kept(*tile_max, args);
      if (!keep) store_zero_tile(c0, n, args, out, warp, lane);
    }
    return keep;
  }

  // Writes zeros to the first `n` rows of the tile at chunk column c0, each element by the thread
  // that consume_tile gives it to (so after its dZ, in program order).
  __device__ __forceinline__ void store_zero_tile(int c0, int n, const LinearLogpBwdDzArgs& args, DZ* out, int warp,
                                                  int lane) const {
#pragma unroll
    for (int chunk = 0; chunk < kChunks; ++chunk) {
      store_zeros(c0 + chunk * COLS, n, args, out + chunk * COLS, warp, lane);
    }
  }

  // Computes dZ of the COLS columns whose column 0 is shard column n0 (chunk column c0) for their
  // first `n` rows and writes it to `out` (the dZ of row 0, column c0); with FILTER the largest
  // |dZ| is folded into tile_max.
  __device__ __forceinline__ void consume(const float* logits, int ld, int n0, int c0, int n,
                                          const LinearLogpBwdDzArgs& args, DZ* out, int warp, int lane) const {
    const int c = lane * kColsPerLane;
    const float bias_min = bias_floor(args.inv_temperature);
    bool valid[kColsPerLane];
    float b[kColsPerLane];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) {
      valid[j] = n0 + c + j < V_VALID && c0 + c + j < args.chunk_cols;
      b[j] = 0.0f;
      if constexpr (kBias) {
        if (valid[j]) b[j] = read_bias<BiasT>(args.bias, n0 + c + j, bias_min);
      }
    }
    // The dZ buffer's columns up to the next multiple of 8 are written (zeros past the chunk).
    const bool writable = c0 + c < dz_padded_cols(args);
    const bool entropy = bwd_has_entropy(args);
    unsigned int local_max = 0u;
#pragma unroll 1
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = i * kWarps + warp;
      if (r >= n) break;
      const BwdRow row = rows[r];
      const float* const src = logits + r * ld + c;
      float acc[kColsPerLane];
      if constexpr (kColsPerLane == 4) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        acc[0] = v.x, acc[1] = v.y, acc[2] = v.z, acc[3] = v.w;
      } else {
        const float2 v = *reinterpret_cast<const float2*>(src);
        acc[0] = v.x, acc[1] = v.y;
      }
      float dz[kColsPerLane];
#pragma unroll
      for (int j = 0; j < kColsPerLane; ++j) {
        const float z = (acc[j] + b[j]) * args.inv_temperature;
        const float p = expf(z - row.lse);
        const float coef = entropy ? fmaf(row.coef_z, z - row.lse, row.coef_p) : row.coef_p;
        const float value = coef * p + (n0 + c + j == row.target ? row.coef_t : 0.0f);
        dz[j] = valid[j] && row.target != kBwdNoGradient ? value : 0.0f;
        // As bits, a NaN is larger than every number and keeps its tile.
        const unsigned int bits = __float_as_uint(fabsf(dz[j]));
        local_max = bits > local_max ? bits : local_max;
      }
      if (writable) store_dz(out + r * args.dz_stride + c, dz);
    }
    if constexpr (FILTER) fold_tile_max(tile_max, local_max, lane);
  }

  // Writes zeros to the first `n` rows of the COLS columns at chunk column c0 (`out` as in
  // consume). Each element is written by the thread that consume gave it to.
  __device__ __forceinline__ void store_zeros(int c0, int n, const LinearLogpBwdDzArgs& args, DZ* out, int warp,
                                              int lane) const {
    const int c = lane * kColsPerLane;
    if (c0 + c >= dz_padded_cols(args)) return;
    float zeros[kColsPerLane];
#pragma unroll
    for (int j = 0; j < kColsPerLane; ++j) zeros[j] = 0.0f;
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = i * kWarps + warp;
      if (r >= n) break;
      store_dz(out + r * args.dz_stride + c, zeros);
    }
  }
};

}  // namespace kernels
}  // namespace shardjit
