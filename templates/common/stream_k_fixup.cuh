// The pieces of a tile split along K (templates/common/stream_k.cuh) merged into one: each piece
// stores its fp32 partial sums in its slot, and the last piece to arrive loads every piece's,
// its own included, and adds them in piece order into its accumulators, then runs the kernel's
// epilogue (common/last_arrival.cuh). The order, and so the result, does not depend on which piece
// arrives last, and no block waits for another: a piece that is not last simply moves on.
//
// Called by the compute threads only (THREADS of them, thread index ctid), after the main loop's
// finish(). A slot holds the tile's accumulators thread-major in 16-byte groups, so that each
// warp stores and loads 512 contiguous bytes at a time.
//
// A thread whose accumulator rows all lie past the tile's last row of data (`holds_rows` false:
// the bottom row tile, past the operand's edge) holds sums no epilogue writes, and skips its
// store and loads; it ends with zeros, which is what those rows sum to, since the loads past the
// edge read zeros. At a few rows (grad_hidden of a decode batch, 7 of the tile's 128) the pieces
// then move an eighth of the tile's bytes, and the last piece's serial loads no longer trail the
// kernel.
#pragma once

#include "common/last_arrival.cuh"
#include "common/stream_k.cuh"

namespace shardjit {
namespace kernels {

// Named barrier of the compute threads' hand-over (bar 1 is the dZ epilogue's).
constexpr unsigned int kStreamKBarrier = 2;

template <int ACCUMULATORS, int THREADS>
struct StreamKFixup {
  static_assert(ACCUMULATORS % 4 == 0, "accumulators go in groups of four");
  static constexpr int kGroups = ACCUMULATORS / 4;
  static constexpr long long kSlotFloats = static_cast<long long>(ACCUMULATORS) * THREADS;

  // Whether this block finishes `segment`'s tile with `acc`: a whole tile always; a piece only
  // if it arrives last, and then `acc` holds the sum of all the pieces on return (zeros where
  // `holds_rows` is false).
  __device__ static bool finish(const StreamKPlan& plan, const TileSegment& segment, float (&acc)[ACCUMULATORS],
                                int ctid, bool holds_rows) {
    if (segment.worker < 0 || stream_k_whole(plan, segment)) return true;
    const TilePieces pieces = stream_k_pieces(plan, segment.tile);
    if (holds_rows) {
      float4* const mine = slot(plan, stream_k_slot(plan, segment.tile, segment.worker), ctid);
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        __stcg(mine + g * THREADS, make_float4(acc[4 * g], acc[4 * g + 1], acc[4 * g + 2], acc[4 * g + 3]));
      }
    }
    const unsigned int pieces_count = static_cast<unsigned int>(pieces.last - pieces.first + 1);
    if (!arrive_last(plan.arrivals + stream_k_counter(plan, segment.tile), 1u, pieces_count, ctid, THREADS,
                     kStreamKBarrier)) {
      return false;
    }
#pragma unroll
    for (int i = 0; i < ACCUMULATORS; ++i) acc[i] = 0.0f;
    if (!holds_rows) return true;
    for (int worker = pieces.first; worker <= pieces.last; ++worker) {
      const float4* const part = slot(plan, stream_k_slot(plan, segment.tile, worker), ctid);
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const float4 v = __ldcg(part + g * THREADS);
        acc[4 * g] += v.x;
        acc[4 * g + 1] += v.y;
        acc[4 * g + 2] += v.z;
        acc[4 * g + 3] += v.w;
      }
    }
    return true;
  }

 private:
  __device__ static float4* slot(const StreamKPlan& plan, int index, int ctid) {
    return reinterpret_cast<float4*>(plan.partials + index * kSlotFloats) + ctid;
  }
};

}  // namespace kernels
}  // namespace shardjit
