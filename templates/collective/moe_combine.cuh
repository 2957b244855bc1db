// MoE combine: output row i = sum over source ranks s, in the order s = 0, 1, ..., of
// gate[i][s] * (row positions[i][s] of source s's expert outputs), skipping positions of -1,
// accumulated in fp32 and written once (a token with no contribution gets zeros). TP partial
// sums are just more sources. A position outside [-1, capacity), or for this rank's own rows
// outside [-1, n_source_rows), poisons its row with NaN and is
// recorded in the status word.
//
// Peer path (sync.world > 0): the sources are the peers' symmetric buffers, read over NVLink.
// A token may use any row of any source, so a block waits for every block of every peer:
//   1. copy its slice of this rank's rows into the symmetric buffer (unless zero-copy), tell
//      the peers;
//   2. wait for all the peers' copies, combine its slice of the tokens;
//   3. tell the peers it is done reading, wait until every block of every peer is, so that no
//      rank overwrites its buffer (next call) while a peer still reads it.
// NCCL path (sync.world == 0): the sources are local copies; no barriers.
// Launch: grid <= kMaxPeerSlots blocks, all resident at once, kPeerThreads threads.
#pragma once

#include "collective/chunk.cuh"
#include "collective/moe_combine_args.cuh"
#include "collective/peer_sync.cuh"
#include "common/math.cuh"

namespace shardjit {
namespace kernels {

__device__ __forceinline__ void record_bad_position(PeerStatus* status, int position) {
  atomicAdd(&status->bad_positions, 1u);
  if (atomicCAS(&status->claimed, 0u, 1u) == 0u) status->first_bad_position = position;
}

template <class T, int WORLD, int H, int VEC_BYTES, bool GATES>
__global__ void __launch_bounds__(kPeerThreads) moe_combine(const MoeCombineArgs args) {
  static_assert(WORLD >= 1 && WORLD <= kMaxPeers, "WORLD is in [1, kMaxPeers]");
  static_assert((H * static_cast<int>(sizeof(T))) % VEC_BYTES == 0, "a row is a whole number of chunks");
  using C = Chunk<T, VEC_BYTES>;
  constexpr int kRowChunks = H * static_cast<int>(sizeof(T)) / VEC_BYTES;
  const bool peers = args.sync.world > 0;
  const int slot = blockIdx.x;
  unsigned long long epoch = 0;
  bool ready = true;

  if (peers) ready = !already_failed(args.sync);
  if (peers && ready) {
    epoch = next_epoch(args.sync, slot);
    if (args.symmetric != nullptr) {
      long long begin, end;
      block_slice(args.n_source_rows * kRowChunks, slot, gridDim.x, begin, end);
      copy_chunks<VEC_BYTES>(args.symmetric, args.rows, begin, end, threadIdx.x, blockDim.x);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();  // zero copy: the rows were written by earlier work on the stream
      publish_to_peers(args.sync, true, slot, epoch);
    }
    ready = wait_for_peers(args.sync, true, 0, gridDim.x, epoch);
  }

  // Threads walk the block's tokens chunk by chunk, several chunks (of any tokens) in flight
  // per thread, so a block keeps NVLink busy however short the rows are.
  long long first, last;
  block_slice(args.n_tokens, slot, gridDim.x, first, last);
  constexpr int kUnroll = WORLD <= 2 ? 4 : (WORLD <= 4 ? 2 : 1);
  const long long begin = first * kRowChunks;
  const long long end = last * kRowChunks;
  const int threads = blockDim.x;
  for (long long i = begin + threadIdx.x; i < end; i += kUnroll * threads) {
    typename C::Raw v[kUnroll][WORLD];
    int position[kUnroll][WORLD];
    bool bad[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long f = i + u * threads;
      const long long token = f / kRowChunks;
      bad[u] = !ready;
#pragma unroll
      for (int s = 0; s < WORLD; ++s) {
        position[u][s] = f < end ? args.positions[token * WORLD + s] : -1;
        // This rank's own rows are read from the caller's buffer, which holds n_source_rows.
        const long long rows = s == args.sync.rank ? args.n_source_rows : args.capacity;
        if (position[u][s] < -1 || position[u][s] >= rows) {
          bad[u] = true;
          if (f % kRowChunks == 0) record_bad_position(args.sync.status, position[u][s]);
        }
      }
#pragma unroll
      for (int s = 0; s < WORLD; ++s) {
        if (!bad[u] && position[u][s] >= 0) {
          v[u][s] = C::load(args.sources[s], position[u][s] * static_cast<long long>(kRowChunks) + f % kRowChunks);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long f = i + u * threads;
      if (f >= end) continue;
      float acc[C::kElems];
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[e] = bad[u] ? quiet_nan() : 0.0f;
#pragma unroll
      for (int s = 0; s < WORLD; ++s) {
        if (!bad[u] && position[u][s] >= 0) {
          C::accumulate(acc, v[u][s], GATES ? args.gates[(f / kRowChunks) * WORLD + s] : 1.0f);
        }
      }
      C::store(args.output, f, C::pack(acc));
    }
  }

  if (!peers) return;
  __syncthreads();
  if (!ready) return;  // the call is already failed; do not wait twice
  if (threadIdx.x == 0) publish_to_peers(args.sync, false, slot, epoch);
  wait_for_peers(args.sync, false, 0, gridDim.x, epoch);
  if (threadIdx.x == 0) finish_epoch(args.sync, slot, epoch);
}

}  // namespace kernels
}  // namespace shardjit
