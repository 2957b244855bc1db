// The layout of a tensor-parallel LinearLogp, agreed once, when the op is built: each rank
// all-gathers a fixed-size record of its config, and every rank checks the same gathered records
// with the same code, so a bad layout raises the same error on every rank and no rank is left
// waiting in a collective. Nothing of this is repeated per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

inline constexpr std::uint32_t kTpLayoutMagic = 0x50544a53;  // "SJTP"
inline constexpr std::uint32_t kTpLayoutVersion = 1;
inline constexpr std::size_t kTpLayoutErrorBytes = 320;

// What one rank says about its op. Plain bytes (no pointers, no padding left undefined: the
// record is zeroed before it is filled), identical in layout on every rank of one shardjit build.
struct TpLayoutRecord {
  std::uint32_t magic;
  std::uint32_t version;
  std::int32_t rank;
  std::int32_t size;
  std::int64_t vocab_start;
  std::int64_t vocab_local;
  std::int64_t vocab_global;  // resolved (0 resolved to vocab_start + vocab_local)
  std::int64_t valid_vocab;   // resolved
  std::int64_t hidden;
  std::int64_t ignore_index;
  std::int32_t dtype;
  std::int32_t target_dtype;
  std::int32_t bias_dtype;  // -1: no bias
  std::uint32_t temperature_bits;
  std::int32_t want_entropy;
  std::int32_t want_backward;
  // What the shared split choice needs of each rank's GPU and forward kernel.
  std::int32_t sm_count;
  std::int32_t tile_bm;
  std::int32_t tile_bn;
  std::int32_t reserved;
  std::int64_t l2_bytes;
  // Not empty: this rank rejected its own config or device; the message, cut to fit.
  char error[kTpLayoutErrorBytes];
};
static_assert(std::is_trivially_copyable_v<TpLayoutRecord>, "records travel as bytes");

// A record of `config` (resolved where it could be) for `rank` of `size`; GPU fields zero.
TpLayoutRecord make_tp_layout_record(const LinearLogpConfig& config, int rank, int size);
void set_tp_layout_error(TpLayoutRecord& record, const std::string& message);

struct TpShard {
  std::int64_t start = 0;
  std::int64_t size = 0;
  std::int64_t valid = 0;  // columns before valid_vocab (0: the shard is all padding)
};

struct TpLayout {
  int tp = 1;
  int rank = 0;
  std::vector<TpShard> shards;    // in rank order; they tile [0, vocab_global)
  std::int64_t max_valid_local = 0;
  GpuShape gpu;                   // the smallest SM count and L2 of the group
  FwdTile split_tile;             // rank 0's forward tile (its bm and bn steer the split choice)
};

// Checks the records of every rank (index = rank) and returns the agreed layout as seen by
// `rank`. Throws Error(kInvalidArgument) with a message that depends on the records only (the
// same on every rank) when: a rank rejected its own config; the records come from different
// shardjit builds; hidden, vocab_global, valid_vocab, dtype, target_dtype, bias_dtype,
// ignore_index, temperature, want_entropy or want_backward differ; the shards do not cover
// [0, vocab_global) contiguously in rank order (gaps and overlaps are named); or there are more
// ranks than one combine kernel merges (kMaxCombineSources). A shard wholly in the padding is
// fine: its partials are empty.
TpLayout check_tp_layout(std::span<const TpLayoutRecord> records, int rank);

}  // namespace shardjit
