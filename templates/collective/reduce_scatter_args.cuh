// Arguments of the peer reduce-scatter kernel (templates/collective/reduce_scatter.cuh). Shared
// verbatim by the host and the kernel, so only built-in types appear here.
#pragma once

#include "collective/peer_sync_args.cuh"

namespace shardjit {
namespace kernels {

// Each block's slice is moved in this many stages, each with its own start flag, so that the
// peers start reading the first stage while the rest is still being copied.
constexpr int kReduceScatterStages = 8;

struct ReduceScatterArgs {
  // Where rank p's [T, H] input is read from: its symmetric buffer as mapped here, or, for this
  // rank, the input itself.
  const void* sources[kMaxPeers];
  const void* input;   // this rank's [T, H] input
  void* symmetric;     // this rank's symmetric buffer; the rows of the other ranks' blocks are
                       // copied into it first, unless null (zero-copy: the input is already there)
  void* output;        // [rows of this rank's block, H]
  long long chunk_offset[kMaxPeers + 1];  // block p is chunks [chunk_offset[p], chunk_offset[p+1])
  PeerSync sync;
};

}  // namespace kernels
}  // namespace shardjit
