// Dense reduce-scatter over peer memory: rank r's output is the sum over every rank p, in the
// order p = 0, 1, ..., of rank p's rows of block r, read over NVLink from p's symmetric buffer
// and accumulated in fp32 (deterministic, the same on every run).
//
// Each block of the grid owns the same slice of every rank's block, cut into
// kReduceScatterStages stages with a start flag each, so its barriers only involve the blocks of
// the same index on the peers:
//   - copier warps (when the input is not in the symmetric buffer already) copy each stage of
//     the slice of the other ranks' blocks into the symmetric buffer and tell the peers;
//   - puller warps wait for each stage of the peers' copies of this rank's block and sum it, so
//     NVLink reads of one stage overlap the copy of the next;
//   - at the end the block tells the peers it is done reading and waits until they are, so no
//     rank overwrites its symmetric buffer (next call) while a peer still reads it.
// Launch: at most kMaxPeerSlots / kReduceScatterStages blocks, all resident at once (the host
// launches one per SM at most), kPeerThreads threads.
#pragma once

#include "collective/chunk.cuh"
#include "collective/peer_sync.cuh"
#include "collective/reduce_scatter_args.cuh"
#include "common/math.cuh"

namespace shardjit {
namespace kernels {

// The part [begin, end) of `count` items that part `b` of `parts` owns.
__device__ __forceinline__ void block_slice(long long count, int b, int parts, long long& begin, long long& end) {
  begin = count * b / parts;
  end = count * (b + 1) / parts;
}

// Stage `stage` of this block's slice of block p: chunks [begin, end).
__device__ __forceinline__ void stage_chunks(const ReduceScatterArgs& args, int p, int stage, long long& begin,
                                             long long& end) {
  const long long base = args.chunk_offset[p];
  long long slice_begin, slice_end;
  block_slice(args.chunk_offset[p + 1] - base, blockIdx.x, gridDim.x, slice_begin, slice_end);
  block_slice(slice_end - slice_begin, stage, kReduceScatterStages, begin, end);
  begin += base + slice_begin;
  end += base + slice_begin;
}

constexpr int kCopierThreads = 128;  // four warps copy; the rest pull
constexpr unsigned int kCopierBarrier = 1;
constexpr unsigned int kPullerBarrier = 2;

// Sums chunks [begin, end) of every source into the output (at chunk index - out_base), several
// chunks per thread in flight; NaN instead when `ready` is false.
template <class T, int WORLD, int VEC_BYTES>
__device__ __forceinline__ void sum_chunks(const ReduceScatterArgs& args, long long begin, long long end,
                                           long long out_base, bool ready, int thread, int threads) {
  using C = Chunk<T, VEC_BYTES>;
  constexpr int kUnroll = WORLD <= 2 ? 8 : (WORLD <= 4 ? 4 : 2);
  for (long long i = begin + thread; i < end; i += kUnroll * threads) {
    typename C::Raw v[kUnroll][WORLD];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
#pragma unroll
      for (int p = 0; p < WORLD; ++p) {
        if (ready && c < end) v[u][p] = C::load(args.sources[p], c);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
      if (c >= end) continue;
      float acc[C::kElems];
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[e] = 0.0f;
      if (ready) {
#pragma unroll
        for (int p = 0; p < WORLD; ++p) C::accumulate(acc, v[u][p]);
      } else {
#pragma unroll
        for (int e = 0; e < C::kElems; ++e) acc[e] = quiet_nan();  // a failed call is poisoned
      }
      C::store(args.output, c - out_base, C::pack(acc));
    }
  }
}

template <class T, int WORLD, int VEC_BYTES>
__global__ void __launch_bounds__(kPeerThreads) reduce_scatter(const ReduceScatterArgs args) {
  static_assert(WORLD >= 2 && WORLD <= kMaxPeers, "WORLD is in [2, kMaxPeers]");
  static_assert(kPeerThreads > kCopierThreads && kCopierThreads % 32 == 0, "whole warps of each role");
  const int block = blockIdx.x;
  const int first_slot = block * kReduceScatterStages;
  const int rank = args.sync.rank;
  const unsigned long long epoch = next_epoch(args.sync, block);
  const bool copy = args.symmetric != nullptr;
  const int copiers = copy ? kCopierThreads : 0;
  bool ready = true;

  if (static_cast<int>(threadIdx.x) < copiers) {
    // Copier warps: the peers' rows of this block's slice, stage by stage.
    for (int stage = 0; stage < kReduceScatterStages; ++stage) {
      for (int p = 0; p < WORLD; ++p) {
        if (p == rank) continue;
        long long begin, end;
        stage_chunks(args, p, stage, begin, end);
        copy_chunks<VEC_BYTES>(args.symmetric, args.input, begin, end, threadIdx.x, copiers);
      }
      bar_sync(kCopierBarrier, copiers);
      if (threadIdx.x == 0) publish_to_peers(args.sync, true, first_slot + stage, epoch);
    }
  } else {
    // Puller warps: each stage of this rank's block once the peers have published it.
    const int thread = threadIdx.x - copiers;
    const int threads = blockDim.x - copiers;
    if (!copy && thread == 0) {
      for (int stage = 0; stage < kReduceScatterStages; ++stage) publish_to_peers(args.sync, true, first_slot + stage, epoch);
    }
    const long long out_base = args.chunk_offset[rank];
    for (int stage = 0; stage < kReduceScatterStages; ++stage) {
      if (ready) ready = wait_for_peers(args.sync, true, first_slot + stage, 1, epoch, thread, threads, kPullerBarrier);
      long long begin, end;
      stage_chunks(args, rank, stage, begin, end);
      sum_chunks<T, WORLD, VEC_BYTES>(args, begin, end, out_base, ready, thread, threads);
    }
  }

  // Done reading: the peers may overwrite their buffers once every rank says so.
  ready = __syncthreads_and(ready) != 0;
  if (!ready) return;  // the call is already failed; do not wait twice
  if (threadIdx.x == 0) publish_to_peers(args.sync, false, block, epoch);
  wait_for_peers(args.sync, false, block, 1, epoch);
  if (threadIdx.x == 0) finish_epoch(args.sync, block, epoch);
}

}  // namespace kernels
}  // namespace shardjit
