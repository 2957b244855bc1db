// Arguments of the peer reduce-scatter kernel (templates/collective/reduce_scatter.cuh). Shared
// verbatim by the host and the kernel, so only built-in types appear here.
#pragma once

#include "collective/peer_sync_args.cuh"

namespace shardjit {
namespace kernels {

// A block's slice is moved in up to this many stages, each with its own start flag, so that
// the receiver sums the first stage while the rest is still on its way.
constexpr int kReduceScatterStages = 8;

struct ReduceScatterArgs {
  const void* input;   // this rank's [T, H] input
  void* output;        // [rows of this rank's block, H]
  // Rank q's receive area as mapped here (this rank's own too): two halves (calls alternate by
  // epoch), each with one slot per other rank (in rank order, q itself left out) of
  // slot_chunks chunks, where that rank puts its rows of block q.
  void* receive[kMaxPeers];
  long long slot_chunks;
  long long chunk_offset[kMaxPeers + 1];  // block p is chunks [chunk_offset[p], chunk_offset[p+1])
  int stages;          // 1 to kReduceScatterStages; 1: every warp sends, then every warp sums
  int low_latency;     // small inputs: 8-byte lines of a 4-byte word and the call's flag, no
                       // barriers (slots then hold twice the bytes)
  PeerSync sync;
};

}  // namespace kernels
}  // namespace shardjit
