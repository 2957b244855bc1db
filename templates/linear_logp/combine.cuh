// Merges the S = args.sources softmax partials of each row (vocabulary splits of this GPU and TP
// ranks) into logp, lse and entropy, and records target ids that are out of range. A row is
// merged by a group of L = combine_lanes_per_row(S) lanes (combine_args.cuh): lane j folds
// sources j, j + L, ... in that order, then the group merges its lanes in a fixed butterfly. L
// depends on S alone, so every rank gets bit-identical results. S is an argument, not a template
// parameter, so one kernel serves every split count.
//
// PEERS = 0: the partials of every source are in one local buffer (a single GPU, or gathered
// by NCCL). The Hopper forward kernel merges a single GPU's partials itself where it runs
// (fwd_merge.cuh, with combine_row below); this kernel does the rest.
//
// PEERS = tp: each rank's partials stay in its symmetric buffer and are read over NVLink: a
// block publishes a start flag (this rank's forward kernel, earlier on the stream, has written
// all its partials), waits for the same block of every peer, merges its rows, then publishes an
// end flag and waits for the peers' (no rank's next forward overwrites partials a peer still
// reads). This replaces the all-gather: no collective, no comm stream.
//
// Launch: kLogpCombineThreads threads per block, kLogpCombineThreads / L rows a block; rows are
// strided over the grid. With PEERS every rank launches the same grid (at most kMaxPeerSlots
// blocks, all resident).
#pragma once

#include "collective/peer_sync.cuh"
#include "common/math.cuh"
#include "linear_logp/combine_args.cuh"
#include "linear_logp/partial_merge.cuh"
#include "linear_logp/partials.cuh"

namespace shardjit {
namespace kernels {

constexpr int kLogpCombineThreads = 256;

template <int PEERS>
__device__ __forceinline__ RowPartial source_partial(const LogpCombineArgs& args, int s, long long row) {
  if constexpr (PEERS == 0) {
    // Through L2: in the forward kernel's merge (fwd_merge.cuh) other blocks wrote them just now.
    const float4 v = __ldcg(reinterpret_cast<const float4*>(args.partials + s * args.source_stride + row));
    return RowPartial{v.x, v.y, v.z, v.w};
  } else {
    const int per_rank = args.sources / PEERS;
    return args.rank_partials[s / per_rank][(s % per_rank) * args.source_stride + row];
  }
}

template <class TargetT, bool ENTROPY, int PEERS>
__device__ __forceinline__ void combine_row(const LogpCombineArgs& args, long long row, int lanes, bool ready);

template <class TargetT, bool ENTROPY, int PEERS>
__global__ void __launch_bounds__(kLogpCombineThreads)
    logp_combine(const LogpCombineArgs args) {
  static_assert(PEERS == 0 || (PEERS >= 2 && PEERS <= kMaxPeers),
                "PEERS is 0 or a rank count in [2, kMaxPeers] (the host makes it divide args.sources)");
  const int slot = blockIdx.x;
  unsigned long long epoch = 0;
  bool ready = true;
  if (PEERS > 0) ready = !already_failed(args.sync);
  if (PEERS > 0 && ready) {
    epoch = next_epoch(args.sync, slot);
    if (threadIdx.x == 0) {
      __threadfence_system();  // the forward kernel's partials, written earlier on this stream
      publish_to_peers(args.sync, true, slot, epoch);
    }
    ready = wait_for_peers(args.sync, true, slot, 1, epoch);
  }
  // Groups are aligned within a warp, so a group's lanes always take the same rows.
  const int lanes = combine_lanes_per_row(args.sources);
  const long long rows_per_block = kLogpCombineThreads / lanes;
  const long long step = static_cast<long long>(gridDim.x) * rows_per_block;
  for (long long row = static_cast<long long>(blockIdx.x) * rows_per_block + threadIdx.x / lanes;
       row < args.n_rows; row += step) {
    combine_row<TargetT, ENTROPY, PEERS>(args, row, lanes, ready);
  }
  if (PEERS > 0) {
    __syncthreads();
    if (!ready) return;  // the call is already failed; do not wait twice
    if (threadIdx.x == 0) publish_to_peers(args.sync, false, slot, epoch);
    wait_for_peers(args.sync, false, slot, 1, epoch);
    if (threadIdx.x == 0) finish_epoch(args.sync, slot, epoch);
  }
}

// This lane's share of a row's sources (lane, lane + lanes, ...), merged as one partial. Two
// passes, so each source is rescaled once against the share's max rather than repeatedly against
// a running one.
template <bool ENTROPY, int PEERS>
__device__ __forceinline__ RowPartial lane_sources(const LogpCombineArgs& args, long long row, int lane, int lanes) {
  RowPartial share = empty_partial();
  float& m = share.max;
#pragma unroll 4
  for (int s = lane; s < args.sources; s += lanes) {
    const RowPartial p = source_partial<PEERS>(args, s, row);
    m = fmaxf(m, p.max);
    share.target = fmaxf(share.target, p.target);
  }
  if (m == neg_inf()) return share;
#pragma unroll 4
  for (int s = lane; s < args.sources; s += lanes) {
    const RowPartial p = source_partial<PEERS>(args, s, row);
    if (p.max == neg_inf()) continue;
    const float shift = p.max - m;
    const float scale = expf(shift);
    share.sum += p.sum * scale;
    if (ENTROPY) share.ent += scale * (p.ent + shift * p.sum);
  }
  return share;
}

// The group's shares merged in a butterfly over its `lanes` lanes (xor 1, 2, ...): a fixed order.
template <bool ENTROPY>
__device__ __forceinline__ RowPartial merge_group(RowPartial r, int lanes) {
  const int lane = threadIdx.x % 32;
  const unsigned int group_mask =
      lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (lane & ~(lanes - 1));
  for (int offset = 1; offset < lanes; offset <<= 1) {
    const float max = __shfl_xor_sync(group_mask, r.max, offset, lanes);
    const float sum = __shfl_xor_sync(group_mask, r.sum, offset, lanes);
    const float ent = __shfl_xor_sync(group_mask, r.ent, offset, lanes);
    const float target = __shfl_xor_sync(group_mask, r.target, offset, lanes);
    merge_stats<ENTROPY>(r, max, sum, ent);
    r.target = fmaxf(r.target, target);
  }
  return r;
}

// One row, by its group of `lanes` lanes; the group's first lane writes it. `ready` false (a peer
// never came) poisons it with NaN.
template <class TargetT, bool ENTROPY, int PEERS>
__device__ __forceinline__ void combine_row(const LogpCombineArgs& args, long long row, int lanes, bool ready) {
  const int lane = static_cast<int>(threadIdx.x) % lanes;
  if (!ready) {
    if (lane != 0) return;
    if (args.logp != nullptr) args.logp[row] = quiet_nan();
    if (args.lse != nullptr) args.lse[row] = quiet_nan();
    if (ENTROPY && args.entropy != nullptr) args.entropy[row] = quiet_nan();
    return;
  }
  const RowPartial merged = merge_group<ENTROPY>(lane_sources<ENTROPY, PEERS>(args, row, lane, lanes), lanes);
  if (lane != 0) return;
  const float m = merged.max;
  const float sum = merged.sum;
  const float ent = merged.ent;
  const float target = merged.target;

  // An empty row (no valid column anywhere) gets lse = -inf and entropy 0 rather than NaN.
  const float log_sum = logf(sum);
  const float lse = m != neg_inf() ? m + log_sum : neg_inf();
  const long long t = static_cast<long long>(static_cast<const TargetT*>(args.targets)[row]);
  float logp;
  if (t == args.ignore_index) {
    logp = 0.0f;
  } else if (t < 0 || t >= args.valid_vocab) {
    logp = quiet_nan();
    atomicAdd(&args.status->bad_rows, 1u);
    if (atomicCAS(&args.status->claimed, 0u, 1u) == 0u) args.status->first_bad_id = t;
  } else {
    // A log-probability is at most 0. The target's z never exceeds the max, but the Hopper
    // epilogue's ex2.approx may leave the max's own term a rounding below 1, which could put an
    // almost certain token a few 1e-7 above 0. NaN (from non-finite inputs) passes through.
    const float d = target - lse;
    logp = d > 0.0f ? 0.0f : d;
  }
  if (args.logp != nullptr) args.logp[row] = logp;
  if (args.lse != nullptr) args.lse[row] = lse;
  if (ENTROPY) {
    if (args.entropy != nullptr) {
      args.entropy[row] = m != neg_inf() ? log_sum - ent / sum : 0.0f;
    }
  }
}

}  // namespace kernels
}  // namespace shardjit
