// Arguments of the partial-statistics combine kernel (templates/linear_logp/combine.cuh).
// Shared verbatim by the host and the kernel, so only built-in types appear here.
#pragma once

#include "collective/peer_sync_args.cuh"
#include "common/host_device.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

// Lanes that merge one row's S sources together (a power of two, at most a warp): about four
// sources a lane, so that a row of many sources (a small call's 128 vocabulary splits) is not one
// thread's long serial walk. It depends on S alone, so every rank of a TP group, and every call,
// merges a row the same way.
SHARDJIT_HOST_DEVICE constexpr int combine_lanes_per_row(int sources) {
  int lanes = 1;
  while (lanes < 32 && lanes * 8 <= sources) lanes *= 2;
  return lanes;
}

struct LogpCombineArgs {
  int sources;                 // S, in [1, kMaxCombineSources]; with PEERS, a multiple of PEERS
  const RowPartial* partials;  // [S][source_stride]: source s's partial of row i at s*source_stride+i
  // PEERS > 0 instead: rank q's sources [S / PEERS][source_stride] as mapped here (its
  // symmetric buffer; this rank's own too), source s = q * (S / PEERS) + j, and the barrier state.
  const RowPartial* rank_partials[kMaxPeers];
  PeerSync sync;
  long long source_stride;     // >= n_rows
  const void* targets;         // t [n_rows] of the kernel's target type
  float* logp;                 // [n_rows]; may be null
  float* lse;                  // [n_rows]; may be null
  float* entropy;              // [n_rows]; may be null (and must be when ENTROPY is false)
  DeviceStatus* status;        // never null
  long long n_rows;
  long long valid_vocab;       // targets must lie in [0, valid_vocab) unless == ignore_index
  long long ignore_index;
};

}  // namespace kernels
}  // namespace shardjit
