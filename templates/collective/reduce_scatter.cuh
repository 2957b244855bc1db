// Dense reduce-scatter over peer memory: rank r's output is the sum over every rank p, in the
// order p = 0, 1, ..., of rank p's rows of block r, accumulated in fp32 (deterministic, the same
// on every run).
//
// Push, then sum locally: each rank writes its rows of every other rank's block straight into
// that rank's receive area over NVLink (stores are posted, so the link stays full without
// waiting on round trips), then publishes a flag; the receiver sums its own input and what it
// received. Each block owns the same slice of every rank's block, cut into args.stages stages
// with a flag each, so its waits only involve the blocks of the same index on the peers, and a
// receiver sums stage k while stage k + 1 is still on its way (sender and summer warps run side
// by side; with one stage, for small inputs, every warp sends, then every warp sums).
//
// Small inputs take a flagged protocol instead (as NCCL's LL and LL128), so the receiver polls
// the data itself and no release, fence or barrier round trip is needed: where a warp's 128-byte
// store arrives whole (NVLink), 128-byte lines that each end in the call's flag (1/31 more
// bytes); elsewhere 4-byte words each in an 8-byte store with the flag (twice the bytes).
//
// Receive areas alternate between two halves by epoch, so no end barrier is needed: a rank
// writes half h of call e only after its call e - 1 saw the peer's flags of call e - 1, which the
// peer published after its call e - 2 (the last reader of half h) had finished. Calls on one
// rank must therefore run in order (one stream, or streams ordered by the caller).
// Launch: at most kMaxPeerSlots / kReduceScatterStages blocks, kPeerThreads threads.
#pragma once

#include "collective/chunk.cuh"
#include "collective/peer_sync.cuh"
#include "collective/reduce_scatter_args.cuh"
#include "common/math.cuh"

namespace shardjit {
namespace kernels {

// Stage `stage` of this block's slice of block p, in chunks from the block's start.
__device__ __forceinline__ void stage_chunks(const ReduceScatterArgs& args, int p, int stage, long long& begin,
                                             long long& end) {
  long long slice_begin, slice_end;
  block_slice(args.chunk_offset[p + 1] - args.chunk_offset[p], blockIdx.x, gridDim.x, slice_begin, slice_end);
  block_slice(slice_end - slice_begin, stage, args.stages, begin, end);
  begin += slice_begin;
  end += slice_begin;
}

// Which slot of dest's receive area holds source's rows of dest's block in call `epoch`: the
// half by the epoch's parity, then the other ranks in rank order (dest itself left out). Every
// protocol lays its slots out this way; a slot is slot_chunks chunks (twice the bytes in the word
// protocol, flagged_lines of its words in the line protocol).
__device__ __forceinline__ long long receive_slot_index(int dest, int source, unsigned long long epoch, int world) {
  return static_cast<long long>(epoch & 1ull) * (world - 1) + (source < dest ? source : source - 1);
}

template <int VEC_BYTES>
__device__ __forceinline__ char* receive_slot(const ReduceScatterArgs& args, int dest, int source,
                                              unsigned long long epoch, int world) {
  const long long slot = receive_slot_index(dest, source, epoch, world);
  return static_cast<char*>(args.receive[dest]) + slot * args.slot_chunks * VEC_BYTES;
}

constexpr int kSenderThreads = 256;  // with stages, eight warps send and eight sum
constexpr unsigned int kSenderBarrier = 1;
constexpr unsigned int kSummerBarrier = 2;

// Sums chunks [begin, end) of every source (sources[p] at the block's start) into out, several
// chunks per thread in flight; NaN instead when `ready` is false.
template <class T, int WORLD, int VEC_BYTES>
__device__ __forceinline__ void sum_chunks(const void* const (&sources)[WORLD], void* out, long long begin,
                                           long long end, bool ready, int thread, int threads) {
  using C = Chunk<T, VEC_BYTES>;
  constexpr int kUnroll = WORLD <= 2 ? 4 : (WORLD <= 4 ? 2 : 1);
  for (long long i = begin + thread; i < end; i += kUnroll * threads) {
    typename C::Raw v[kUnroll][WORLD];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
#pragma unroll
      for (int p = 0; p < WORLD; ++p) {
        if (ready && c < end) v[u][p] = C::load(sources[p], c);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const long long c = i + u * threads;
      if (c >= end) continue;
      float acc[C::kElems];
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[e] = ready ? 0.0f : quiet_nan();  // a failed call is poisoned
      if (ready) {
#pragma unroll
        for (int p = 0; p < WORLD; ++p) C::accumulate(acc, v[u][p]);
      }
      C::store(out, c, C::pack(acc));
    }
  }
}

// Sends stage `stage` of this block's slice of every other rank's block into its receive slot.
template <int WORLD, int VEC_BYTES>
__device__ __forceinline__ void send_stage(const ReduceScatterArgs& args, int stage, unsigned long long epoch,
                                           int thread, int threads) {
  const int rank = args.sync.rank;
  for (int p = 0; p < WORLD; ++p) {
    if (p == rank) continue;
    long long begin, end;
    stage_chunks(args, p, stage, begin, end);
    const char* from = static_cast<const char*>(args.input) + args.chunk_offset[p] * VEC_BYTES;
    copy_chunks<VEC_BYTES>(receive_slot<VEC_BYTES>(args, p, rank, epoch, WORLD), from, begin, end, thread, threads);
  }
}

// The end of a flagged call: the block's epoch moves on if every thread got its data, else the
// block counts one timeout (its output words that never came are NaN).
__device__ __forceinline__ void finish_flagged_call(const PeerSync& sync, bool ok, unsigned long long epoch) {
  const bool all_ok = __syncthreads_and(ok) != 0;
  if (threadIdx.x == 0) {
    if (all_ok) {
      finish_epoch(sync, blockIdx.x, epoch);
    } else {
      atomicAdd(&sync.status->timeouts, 1u);
    }
  }
}

// The word protocol (kFlaggedWords): grid-strided over 4-byte words; a word that never comes (a
// dead peer) poisons its output word with NaN.
template <class T, int WORLD, int VEC_BYTES>
__device__ __forceinline__ void reduce_scatter_words(const ReduceScatterArgs& args, unsigned long long epoch) {
  using C = Chunk<T, 4>;
  constexpr long long kWordsPerChunk = VEC_BYTES / 4;
  const int rank = args.sync.rank;
  const unsigned long long flag = (epoch & 0xffffffffull) << 32;
  const long long thread = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long threads = static_cast<long long>(gridDim.x) * blockDim.x;
  const long long slot_words = args.slot_chunks * kWordsPerChunk;
  const auto slot_of = [&](int dest, int source) {
    const long long slot = receive_slot_index(dest, source, epoch, WORLD);
    return static_cast<unsigned long long*>(args.receive[dest]) + slot * slot_words;
  };
  const unsigned int* input = static_cast<const unsigned int*>(args.input);
  bool ok = !already_failed(args.sync);

  for (int p = 0; p < WORLD && ok; ++p) {
    if (p == rank) continue;
    const unsigned int* from = input + args.chunk_offset[p] * kWordsPerChunk;
    unsigned long long* to = slot_of(p, rank);
    const long long words = (args.chunk_offset[p + 1] - args.chunk_offset[p]) * kWordsPerChunk;
    for (long long i = thread; i < words; i += threads) st_relaxed_sys_u64(to + i, flag | from[i]);
  }

  const unsigned int* mine = input + args.chunk_offset[rank] * kWordsPerChunk;
  const long long words = (args.chunk_offset[rank + 1] - args.chunk_offset[rank]) * kWordsPerChunk;
  const unsigned long long began = globaltimer_ns();
  for (long long i = thread; i < words; i += threads) {
    float acc[C::kElems];
#pragma unroll
    for (int e = 0; e < C::kElems; ++e) acc[e] = 0.0f;
#pragma unroll
    for (int p = 0; p < WORLD; ++p) {
      Bytes4 v;
      if (p == rank) {
        v.w[0] = mine[i];
      } else {
        const unsigned long long* line = slot_of(rank, p) + i;
        unsigned long long got = ld_relaxed_sys_u64(line);
        while (ok && (got & 0xffffffff00000000ull) != flag) {
          if (globaltimer_ns() - began > args.sync.timeout_ns) ok = false;
          got = ld_relaxed_sys_u64(line);
        }
        v.w[0] = static_cast<unsigned int>(got);
      }
      C::accumulate(acc, v);
    }
    if (!ok) {
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[e] = quiet_nan();
    }
    C::store(args.output, i, C::pack(acc));
  }
  finish_flagged_call(args.sync, ok, epoch);
}

// The line protocol (kFlaggedLines). Line l of a block carries its words [31 l, 31 l + 31) and
// the call's flag in its last 4 bytes; lane j of the 8 lanes that move a line holds its bytes
// [16 j, 16 j + 16), so lane 7 holds three words and the flag, and one warp instruction stores (or
// polls) four whole lines. Warps stride over lines together, so a poll is voted on by the whole
// warp and the lanes of a line see the flag their own load came with.
template <class T, int WORLD, int VEC_BYTES>
__device__ __forceinline__ void reduce_scatter_lines(const ReduceScatterArgs& args) {
  using C = Chunk<T, 4>;
  constexpr long long kWordsPerChunk = VEC_BYTES / 4;
  constexpr int kLanesPerLine = kLineBytes / 16;
  constexpr int kLinesPerWarp = 32 / kLanesPerLine;
  constexpr unsigned int kWarp = 0xffffffffu;
  const int rank = args.sync.rank;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int part = lane % kLanesPerLine;
  const int flag_lane = lane | (kLanesPerLine - 1);
  const int data_words = part + 1 < kLanesPerLine ? 4 : 3;
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / 32;
  const long long slot_bytes = flagged_lines(args.slot_chunks * kWordsPerChunk) * kLineBytes;
  const auto words_of = [&](int p) { return (args.chunk_offset[p + 1] - args.chunk_offset[p]) * kWordsPerChunk; };
  const unsigned int* input = static_cast<const unsigned int*>(args.input);
  // This lane's data words of line l of block p (zeros past the block's end).
  const auto line_words = [&](int p, long long l) {
    const unsigned int* from = input + args.chunk_offset[p] * kWordsPerChunk;
    const long long words = words_of(p);
    const long long w0 = l * kLineDataWords + part * 4;
    Bytes16 v;
#pragma unroll
    for (int k = 0; k < 4; ++k) v.w[k] = k < data_words && w0 + k < words ? from[w0 + k] : 0u;
    return v;
  };
  // The first line this lane sends is read before the epoch and the status word, so that the
  // three reads' latencies overlap: at decode sizes they are on the call's critical path. It is
  // stored only once the status check has passed.
  const int first_peer = rank == 0 ? 1 : 0;
  const long long first_line = warp * kLinesPerWarp + lane / kLanesPerLine;
  const Bytes16 first_words = line_words(first_peer, first_line);
  // First needed at the stores.
  const unsigned long long epoch = next_epoch(args.sync, blockIdx.x);
  const unsigned int flag = static_cast<unsigned int>(epoch);
  const auto slot_of = [&](int dest, int source) {
    return static_cast<char*>(args.receive[dest]) + receive_slot_index(dest, source, epoch, WORLD) * slot_bytes;
  };
  bool ok = !already_failed(args.sync);

  for (int p = 0; p < WORLD && ok; ++p) {
    if (p == rank) continue;
    char* to = slot_of(p, rank);
    const long long lines = flagged_lines(words_of(p));
    for (long long l = first_line; l < lines; l += warps * kLinesPerWarp) {
      Bytes16 v = p == first_peer && l == first_line ? first_words : line_words(p, l);
      if (data_words == 3) v.w[3] = flag;
      st_volatile_v4_u32(to + l * kLineBytes + part * 16, v);
    }
  }

  const long long words = words_of(rank);
  const long long lines = flagged_lines(words);
  const unsigned long long began = globaltimer_ns();
  for (long long first = warp * kLinesPerWarp; first < lines; first += warps * kLinesPerWarp) {
    const long long l = first + lane / kLanesPerLine;
    const bool here = l < lines;
    const long long w0 = l * kLineDataWords + part * 4;
    float acc[4][C::kElems];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int e = 0; e < C::kElems; ++e) acc[k][e] = 0.0f;
    }
    // This rank's own words are read before any poll (a volatile poll keeps later reads behind
    // it), so that no read stands between the last line's arrival and the sum.
    const Bytes16 own = line_words(rank, l);
#pragma unroll
    for (int p = 0; p < WORLD; ++p) {
      Bytes16 v = {{0u, 0u, 0u, 0u}};
      if (p == rank) {
        v = own;
      } else {
        const char* line = slot_of(rank, p) + l * kLineBytes + part * 16;
        bool arrived = !here;
        while (true) {
          if (!arrived && ok) v = ld_volatile_v4_u32(line);
          // Outside the ||: a full-mask shuffle needs all 32 lanes, arrived or not.
          const unsigned int line_flag = __shfl_sync(kWarp, v.w[3], flag_lane);
          arrived = arrived || line_flag == flag;
          if (__all_sync(kWarp, arrived || !ok)) break;
          if (!arrived && globaltimer_ns() - began > args.sync.timeout_ns) ok = false;
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (k < data_words) C::accumulate(acc[k], Bytes4{{v.w[k]}});
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if (!here || k >= data_words || w0 + k >= words) continue;
      if (!ok) {
#pragma unroll
        for (int e = 0; e < C::kElems; ++e) acc[k][e] = quiet_nan();
      }
      C::store(args.output, w0 + k, C::pack(acc[k]));
    }
  }
  finish_flagged_call(args.sync, ok, epoch);
}

template <class T, int WORLD, int VEC_BYTES>
__global__ void __launch_bounds__(kPeerThreads) reduce_scatter(const ReduceScatterArgs args) {
  static_assert(WORLD >= 2 && WORLD <= kMaxPeers, "WORLD is in [2, kMaxPeers]");
  static_assert(kPeerThreads > kSenderThreads && kSenderThreads % 32 == 0, "whole warps of each role");
  // Launched to start early (the host's LaunchShape::early_start): nothing before this wait may
  // touch memory. The next call may then be launched; its blocks wait for this grid the same way.
  griddep_wait();
  griddep_launch_dependents();
  const int block = blockIdx.x;
  const int first_slot = block * kReduceScatterStages;
  const int rank = args.sync.rank;
  if (args.protocol == kFlaggedWords) {
    reduce_scatter_words<T, WORLD, VEC_BYTES>(args, next_epoch(args.sync, block));
    return;
  }
  if (args.protocol == kFlaggedLines) {
    reduce_scatter_lines<T, WORLD, VEC_BYTES>(args);
    return;
  }
  const unsigned long long epoch = next_epoch(args.sync, block);
  const bool split = args.stages > 1;
  const int senders = split ? kSenderThreads : blockDim.x;
  bool ready = !already_failed(args.sync);

  if (ready && static_cast<int>(threadIdx.x) < senders) {
    for (int stage = 0; stage < args.stages; ++stage) {
      send_stage<WORLD, VEC_BYTES>(args, stage, epoch, threadIdx.x, senders);
      if (split) {
        bar_sync(kSenderBarrier, senders);
      } else {
        __syncthreads();
      }
      if (threadIdx.x == 0) publish_to_peers(args.sync, true, first_slot + stage, epoch);
    }
  }
  if (!split || static_cast<int>(threadIdx.x) >= senders) {
    // Summers: this rank's input plus what each peer sent, in rank order, stage by stage.
    const int thread = split ? threadIdx.x - senders : threadIdx.x;
    const int threads = split ? blockDim.x - senders : blockDim.x;
    const unsigned int barrier = split ? kSummerBarrier : 0;
    const void* sources[WORLD];
#pragma unroll
    for (int p = 0; p < WORLD; ++p) {
      sources[p] = p == rank ? static_cast<const char*>(args.input) + args.chunk_offset[rank] * VEC_BYTES
                             : receive_slot<VEC_BYTES>(args, rank, p, epoch, WORLD);
    }
    for (int stage = 0; stage < args.stages; ++stage) {
      if (ready) ready = wait_for_peers(args.sync, true, first_slot + stage, 1, epoch, thread, threads, barrier);
      long long begin, end;
      stage_chunks(args, rank, stage, begin, end);
      sum_chunks<T, WORLD, VEC_BYTES>(sources, args.output, begin, end, ready, thread, threads);
    }
  }
  const bool all_ready = __syncthreads_and(ready) != 0;
  if (threadIdx.x == 0 && all_ready) finish_epoch(args.sync, block, epoch);
}

}  // namespace kernels
}  // namespace shardjit
