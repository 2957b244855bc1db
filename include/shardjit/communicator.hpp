// A Communicator joins the processes (one per GPU) of a tensor-parallel group through NCCL, for
// the ops that exchange data between the ranks (LinearLogp with a vocabulary-sharded LM head,
// ReduceScatter, MoeCombine).
// It owns a CUDA stream of its own, on which those ops issue their collectives, ordered with the
// caller's stream by events.
//
// NCCL is opened at run time (libnccl.so.2, 2.14 or newer), never linked: on a machine without
// it everything else of shardjit works and only these calls fail, with Error(kCommError).
//
// Every host-side wait on the peers is bounded by CommOptions::timeout: joining, the layout
// exchange when a TP op is built, the enqueue of each collective (a non-blocking communicator
// may report it in progress for a while), and LinearLogp::check (or strict mode) waiting for a
// stream that waits for a collective. When it runs out, a communicator that shardjit created is
// aborted (ncclCommAbort, which also stops its kernels still waiting on the GPU) and
// Error(kCommError) says which wait timed out; a dead or missing peer is an error, not a hang. A
// collective is not waited for past its enqueue: a forward returns once its work is queued.
//
// A caller that waits on the stream itself (cudaStreamSynchronize) instead of calling check() is
// covered by a watchdog thread: an NCCL collective of a created communicator that has run for
// `timeout` without finishing (its clock starts when the work before it on the stream is done,
// so time spent queued does not count) aborts the communicator, which ends the collective's
// kernel so that the caller's wait returns. A collective that can no longer finish, because
// NCCL reported an error on the communicator, is aborted at once instead of at its timeout. The results of that call are then garbage: call
// check() after such a wait; it raises Error(kCommError) naming the collective. Not watched:
// collectives captured into a CUDA graph, and those of a wrapped communicator (the caller owns
// its abort). The thread's event queries never disturb a graph capture on another thread.
//
// Rules the ranks must keep (they cannot be checked per call without adding collectives):
// every rank builds the same ops in the same order and makes the same calls on them, with the
// same number of rows, in the same order. A communicator and the ops built on it are used by one
// thread at a time, and it outlives those ops. The Runtime it was created with outlives it.
#pragma once

#include <array>
#include <chrono>
#include <memory>

#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

struct CommOptions {
  // Longest any host-side wait on the peers may take (see above). Long enough for a slow NCCL
  // start on a large node; tests use a few seconds. Positive and at most kMaxCommTimeout: every
  // wait is bounded, and a deadline this far out still fits the clocks' arithmetic.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

inline constexpr std::chrono::milliseconds kMaxCommTimeout = std::chrono::hours(24 * 365);

// The bytes of an ncclUniqueId: made by one rank (new_unique_id), sent to the others by the
// caller's own means (a pipe, a file, the launcher's store), passed to create() on every rank.
using CommUniqueId = std::array<char, 128>;

class Communicator {
 public:
  // A fresh id for a new group (ncclGetUniqueId). Needs NCCL but no GPU and no CUDA context, so
  // a launcher may call it before it forks its per-GPU processes.
  static CommUniqueId new_unique_id();

  // Joins the group `unique_id` as `rank` of `size` on CUDA device `device` (an ordinal of this
  // process). Non-blocking NCCL initialization, polled until every rank has joined or
  // options.timeout has passed (then the half-made communicator is aborted and
  // Error(kCommError) raised). Owns the NCCL communicator: destroys it on destruction.
  static Communicator create(Runtime& runtime, int device, int rank, int size, const CommUniqueId& unique_id,
                             const CommOptions& options = {});

  // Uses an existing ncclComm_t (passed as void*, so that this header needs no nccl.h) made for
  // `device` by the caller, who keeps it alive longer than this object and destroys it. Rank
  // and size are NCCL's. On a timeout the caller's communicator is not aborted (that is the
  // caller's to do; the error says so).
  static Communicator wrap(Runtime& runtime, void* nccl_comm, int device, const CommOptions& options = {});

  ~Communicator();
  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  int device() const;
  const CommOptions& options() const;
  // Changes the bound of later waits, e.g. a long one while the ops are built (first-time
  // kernel compiles on one rank keep the others waiting in the build exchange) and a short one
  // for steady-state calls; collectives already enqueued keep the bound they were enqueued with.
  // Error(kInvalidArgument) unless positive and at most kMaxCommTimeout.
  void set_timeout(std::chrono::milliseconds timeout);
  // The stream the collectives run on (a CUstream), created with the communicator.
  StreamHandle stream() const;
  // The ncclComm_t; null once a created communicator is aborted (a wrapped one's handle stays:
  // it is the caller's, and the caller frees it). The watchdog may abort (and free) a created
  // communicator from its own thread at any time after a collective timed out, so NCCL calls of
  // the caller's own on this handle race with that; a caller that needs its own NCCL calls makes
  // its own communicator and wraps it.
  void* nccl_comm() const;

  // True once the communicator was aborted (after a timeout or an NCCL error, or by abort());
  // every later call of an op that uses it raises Error(kCommError).
  bool aborted() const;
  // Aborts now: a created communicator is torn down with ncclCommAbort (its pending collectives
  // end); a wrapped one is only marked unusable for shardjit.
  void abort();

  // The internals the ops reach through; not part of the stable API.
  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardjit
