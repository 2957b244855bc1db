// MoeCombine: the combine step of an expert-parallel (and tensor-parallel) MoE layer. Every rank
// holds a buffer of expert-output rows [R <= capacity, H]; for each destination token this rank
// owns and each source rank s, positions[token][s] names a row of s's buffer, or -1 where the
// token was not routed to s. Output row = sum over s in rank order of gate[token][s] x that row
// (gates optional, 1 without), accumulated in fp32, written in the dtype; a token with no
// contribution gets zeros. TP partial sums of the same expert output are just more sources.
// A position outside [-1, capacity) poisons its row with NaN and is reported by check(); so does
// one that names a row of this rank's own buffer past the R rows of this call (a peer's row
// count is not known here: rows of a peer's buffer past its R hold whatever was there).
//
// Paths, the 8-rank limit, collective build and destruction, graph capture and dead peers: as
// ReduceScatter (include/shardjit/reduce_scatter.hpp). On the NCCL path each rank's buffer
// (capacity rows) is all-gathered, then a local kernel combines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "shardjit/collective_path.hpp"
#include "shardjit/communicator.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

struct MoeCombineConfig {
  DType dtype = DType::kBF16;      // bf16, fp16 or fp32
  std::int64_t hidden = 0;         // H; H x element size a multiple of 4 bytes
  std::int64_t capacity = 0;       // rows of every rank's expert-output buffer
  bool gates = false;              // whether run() takes gate weights
  CollectivePath path = CollectivePath::kAuto;
  // kAuto takes NCCL for buffers (capacity x H x element size) of more bytes than this; 0: never.
  std::size_t nccl_above_bytes = 0;
};

struct MoeCombineCall {
  MatrixView rows;        // this rank's expert outputs [R <= capacity, H], packed
  MatrixView positions;   // int32 [tokens, world], packed: source s's row for each token, or -1
  MatrixView gates;       // fp32 [tokens, world], packed; with config.gates only
  MatrixView output;      // [tokens, H], packed; apart from the other views and rows_buffer()
};

struct BadPositionReport {
  std::uint32_t bad_positions = 0;     // (token, source) pairs outside [-1, capacity)
  std::int64_t first_bad_position = 0; // one of them (meaningful when bad_positions > 0)
};

class MoeCombine {
 public:
  // Collective (see ReduceScatter).
  MoeCombine(Runtime& runtime, Communicator& comm, const MoeCombineConfig& config);
  ~MoeCombine();
  MoeCombine(const MoeCombine&) = delete;
  MoeCombine& operator=(const MoeCombine&) = delete;

  // Enqueues one combine on `stream`. Every rank calls it; token counts may differ per rank. A
  // call refused here on one rank (bad views) leaves the peers' kernels waiting until the
  // communicator's timeout: check the views before the ranks diverge.
  void run(const MoeCombineCall& call, StreamHandle stream);

  // Zero copy: the op's own rows buffer [capacity, H] (the peer path's symmetric buffer, or the
  // NCCL path's local slot). Write up to `source_rows` rows there, then run with call.rows left
  // empty (data null) and call.rows.rows = source_rows.
  MatrixView rows_buffer();

  CollectivePath path() const;

  // The CUDA device ordinal the op runs on (the communicator's).
  int device() const;

  // Waits for `stream` (bounded), raises Error(kCommError) if a call gave up waiting for a
  // peer, and returns and clears the bad-position record. Not during a graph capture of
  // `stream` (kInvalidArgument).
  BadPositionReport check(StreamHandle stream);

  const MoeCombineConfig& config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardjit
