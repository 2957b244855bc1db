// ReduceScatter: every rank holds an input [T, H]; rank r receives the sum over all ranks of
// rows [offset_r, offset_r + rows_per_rank[r]) of their inputs (blocks may be uneven), written in
// the input's dtype. At most 8 ranks, on either path. On the peer path the sum runs in fp32 in
// rank order (0, 1, ...), the same bits on every run; on the NCCL path in NCCL's order and in
// the input's dtype.
//
// Inside a host one JIT kernel does it: each rank writes its rows of the other ranks' blocks
// straight into their receive buffers over NVLink (symmetric buffers registered once, when the
// op is built, through CUDA IPC handles exchanged over the communicator), publishes flags in
// device memory, and sums what it received with its own rows. The input is read where it is (no
// staging copy), there is no host involvement per call, calls can be captured in a CUDA graph,
// and the result has the same bits on every run. Where peers cannot be reached
// (other hosts), or where config.nccl_above_bytes says NCCL is faster, the op runs
// ncclReduceScatter (one ncclReduce per block in a group for uneven blocks). Which path was
// taken is logged once (info) and readable with path().
//
// Building is collective, like a tensor-parallel LinearLogp: every rank builds the same ops in
// the same order with the same config (checked here, once: a difference raises the same
// Error(kInvalidArgument) on every rank) and makes the same calls. Destruction is collective too:
// every rank destroys the op; each waits for its GPU's queued work, then up to the communicator's
// timeout for the peers to release their mappings of its buffer (a rank that destroys the op
// alone waits that long, and the communicator is then aborted). Build every op before capturing
// any graph that uses one.
//
// A peer that does not join a call within the communicator's timeout makes the waiting rank's
// kernel give up: its output becomes NaN and check() raises Error(kCommError) (the communicator
// is aborted when shardjit owns it; the op is unusable after that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shardjit/collective_path.hpp"
#include "shardjit/communicator.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

struct ReduceScatterConfig {
  DType dtype = DType::kBF16;                // bf16, fp16 or fp32
  std::int64_t hidden = 0;                   // H; H x element size a multiple of 4 bytes
  std::vector<std::int64_t> rows_per_rank;   // one block size per rank (0 allowed); T = their sum
  CollectivePath path = CollectivePath::kAuto;
  // kAuto takes NCCL for inputs (T x H x element size) of more bytes than this; 0: never by size.
  // On 2 x H200 (NVLink) the peer path was faster at every size measured, 256 KiB to 1.75 GiB a
  // rank (docs/benchmarks.md), hence the default; set it where a measurement on your machine
  // shows NCCL ahead above some size.
  std::size_t nccl_above_bytes = 0;
};

class ReduceScatter {
 public:
  // Collective (see above). Runs on the communicator's device.
  ReduceScatter(Runtime& runtime, Communicator& comm, const ReduceScatterConfig& config);
  ~ReduceScatter();
  ReduceScatter(const ReduceScatter&) = delete;
  ReduceScatter& operator=(const ReduceScatter&) = delete;

  // Enqueues the reduce-scatter of `input` [T, H] into `output` [rows_per_rank[rank], H] on
  // `stream`. Both packed (row_stride = H), of the config's dtype, aligned to 16 bytes, and
  // apart (an output inside the input is refused). A rank's
  // calls run in the order they are enqueued (one stream, or streams the caller orders): the
  // peer kernel alternates between two receive buffers and relies on it. A call refused here on
  // one rank (bad views) leaves the peers' kernels waiting until the communicator's timeout.
  void run(const MatrixView& input, const MatrixView& output, StreamHandle stream);

  // kPeer or kNccl: what the op runs.
  CollectivePath path() const;

  // The CUDA device ordinal the op runs on (the communicator's).
  int device() const;

  // Waits for `stream` (bounded by the communicator's timeout) and raises Error(kCommError) if
  // a call gave up waiting for a peer. Not during a graph capture of `stream` (kInvalidArgument).
  void check(StreamHandle stream);

  const ReduceScatterConfig& config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardjit
