// Dense reduce-scatter over peer memory: rank r's output is the sum over every rank p, in the
// order p = 0, 1, ..., of rank p's rows of block r, read over NVLink from p's symmetric buffer
// and accumulated in fp32 (deterministic, the same on every run).
//
// Each block of the grid owns one barrier slot and the same slice of every rank's block, so its
// barriers only involve the blocks of the same index on the peers:
//   1. copy its slice of the other ranks' blocks from the input into the symmetric buffer
//      (skipped in zero-copy mode), then tell the peers;
//   2. wait for the peers' copies of its slice of this rank's block, sum and write the output;
//   3. tell the peers it is done reading and wait until they are, so that no rank overwrites
//      its symmetric buffer (next call) while a peer still reads it.
// Launch: grid <= kMaxPeerSlots blocks, all resident at once (the host launches one per SM at
// most), kPeerThreads threads.
#pragma once

#include "collective/chunk.cuh"
#include "collective/peer_sync.cuh"
#include "collective/reduce_scatter_args.cuh"
#include "common/math.cuh"

namespace shardjit {
namespace kernels {

// The part [begin, end) of `count` items that block `b` of `blocks` owns.
__device__ __forceinline__ void block_slice(long long count, int b, int blocks, long long& begin, long long& end) {
  begin = count * b / blocks;
  end = count * (b + 1) / blocks;
}

template <class T, int WORLD, int VEC_BYTES>
__global__ void __launch_bounds__(kPeerThreads) reduce_scatter(const ReduceScatterArgs args) {
  static_assert(WORLD >= 2 && WORLD <= kMaxPeers, "WORLD is in [2, kMaxPeers]");
  using C = Chunk<T, VEC_BYTES>;
  const int slot = blockIdx.x;
  const int rank = args.sync.rank;
  const unsigned long long epoch = next_epoch(args.sync, slot);

  // 1. The peers' rows of this block's slice, into the symmetric buffer.
  if (args.symmetric != nullptr) {
    for (int p = 0; p < WORLD; ++p) {
      if (p == rank) continue;
      long long begin, end;
      block_slice(args.chunk_offset[p + 1] - args.chunk_offset[p], slot, gridDim.x, begin, end);
      const long long base = args.chunk_offset[p];
      copy_chunks<VEC_BYTES>(args.symmetric, args.input, base + begin, base + end, threadIdx.x, blockDim.x);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) publish_to_peers(args.sync, true, slot, epoch);
  const bool ready = wait_for_peers(args.sync, true, slot, 1, epoch);

  // 2. Sum this rank's block, sources in rank order. Several chunks per thread keep enough
  // NVLink reads in flight; fewer with more sources, for registers.
  constexpr int kUnroll = WORLD <= 2 ? 4 : (WORLD <= 4 ? 2 : 1);
  const long long base = args.chunk_offset[rank];
  long long begin, end;
  block_slice(args.chunk_offset[rank + 1] - base, slot, gridDim.x, begin, end);
  const int threads = blockDim.x;
  for (long long i = begin + threadIdx.x; i < end; i += kUnroll * threads) {
    typename C::Raw v[kUnroll][WORLD];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
      if (c < end) {
#pragma unroll
        for (int p = 0; p < WORLD; ++p) v[u][p] = ready ? C::load(args.sources[p], base + c) : typename C::Raw{};
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
      if (c >= end) continue;
      float acc[C::kElems];
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[e] = ready ? 0.0f : quiet_nan();
#pragma unroll
      for (int p = 0; p < WORLD; ++p) C::accumulate(acc, v[u][p]);  // NaN stays NaN: a failed call is poisoned
      C::store(args.output, c, C::pack(acc));
    }
  }

  // 3. Done reading: the peers may overwrite their buffers once every rank says so.
  __syncthreads();
  if (!ready) return;  // the call is already failed; do not wait twice
  if (threadIdx.x == 0) publish_to_peers(args.sync, false, slot, epoch);
  wait_for_peers(args.sync, false, slot, 1, epoch);
  if (threadIdx.x == 0) finish_epoch(args.sync, slot, epoch);
}

}  // namespace kernels
}  // namespace shardjit
