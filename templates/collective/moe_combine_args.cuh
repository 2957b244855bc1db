// Arguments of the MoE combine kernel (templates/collective/moe_combine.cuh). Shared verbatim by
// the host and the kernel, so only built-in types appear here.
#pragma once

#include "collective/peer_sync_args.cuh"

namespace shardjit {
namespace kernels {

struct MoeCombineArgs {
  // Where source rank s's expert-output rows [capacity, H] are read from: its symmetric buffer
  // as mapped here (peer path), the local staging slot NCCL gathered it into (NCCL path), or,
  // for this rank, its rows themselves.
  const void* sources[kMaxPeers];
  const void* rows;          // this rank's expert-output rows [n_source_rows, H]
  void* symmetric;           // peer path: this rank's symmetric buffer, which `rows` is copied into
                             // first; null when the rows are there already (zero-copy) or on
                             // the NCCL path
  long long n_source_rows;   // rows of `rows` (<= capacity)
  long long capacity;        // rows of every source buffer; positions must be below it
  const int* positions;      // [n_tokens, WORLD]: row of source s for token i, -1 where none
  const float* gates;        // [n_tokens, WORLD] weight of each contribution; null: all 1
  void* output;              // [n_tokens, H]
  long long n_tokens;
  PeerSync sync;             // peer path; sync.world == 0 on the NCCL path (no barriers)
};

}  // namespace kernels
}  // namespace shardjit
