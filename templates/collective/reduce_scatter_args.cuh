// Arguments of the peer reduce-scatter kernel (templates/collective/reduce_scatter.cuh). Shared
// verbatim by the host and the kernel, so only built-in types appear here.
#pragma once

#include "collective/peer_sync_args.cuh"
#include "common/host_device.cuh"

namespace shardjit {
namespace kernels {

// A block's slice is moved in up to this many stages, each with its own start flag, so that
// the receiver sums the first stage while the rest is still on its way.
constexpr int kReduceScatterStages = 8;

// How a call moves its data (ReduceScatterArgs::protocol).
//   kFlaggedStages: stores, then a release flag per stage that the receiver acquires (large
//                   inputs; the data crosses the link once).
//   kFlaggedWords:  every 4-byte word in an 8-byte store with the call's flag (single-copy
//                   atomic on any link), polled by the receiver: no flag round trip, twice the
//                   bytes.
//   kFlaggedLines:  128-byte lines of 124 bytes of data and a 4-byte flag, each stored by 8
//                   lanes of a warp in one instruction; only where a warp's 128-byte store
//                   arrives whole (NVLink): no flag round trip, 1/31 more bytes.
constexpr int kFlaggedStages = 0;
constexpr int kFlaggedWords = 1;
constexpr int kFlaggedLines = 2;
constexpr int kLineBytes = 128;
// 4-byte words of data in a line; the last 4 bytes are the flag, the epoch's low 32 bits (as in
// the word protocol). That is enough: every call rewrites all of its half's lines, so a line
// holds this call's epoch or that of the call two before, which differ in their low bits.
constexpr int kLineDataWords = 31;

// Lines that carry `words` words of data.
SHARDJIT_HOST_DEVICE constexpr long long flagged_lines(long long words) {
  return (words + kLineDataWords - 1) / kLineDataWords;
}

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
  int protocol;        // kFlaggedStages, kFlaggedWords or kFlaggedLines (slots are then sized
                       // for the flagged words or lines)
  PeerSync sync;
};

}  // namespace kernels
}  // namespace shardjit
