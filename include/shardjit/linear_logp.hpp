// LinearLogp: log-probabilities of given target tokens under an LM head z = (X W^T + b) / T,
// with the log-sum-exp and optionally the entropy of every row, without materializing the
// N x V logits. Built once per configuration (kernels are compiled or loaded then), called many
// times on the caller's stream.
//
// An op owns one workspace (partials, dZ chunk, status word), which every call uses: call one op
// from one thread at a time (a call from a second thread while one runs is refused with
// Error(kInvalidArgument)), and keep its calls on the GPU in order (one stream, or streams
// ordered by events). Work on streams that run side by side takes one op each; ops of the same
// configuration share their kernels through the Runtime.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "shardjit/communicator.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

// LinearLogpConfig::keep_logits_bytes's default: a keep budget that follows the op's buffers.
inline constexpr std::int64_t kKeepLogitsAuto = -1;

struct LinearLogpConfig {
  std::int64_t hidden = 0;        // H, a multiple of 8
  std::int64_t vocab_start = 0;   // global id of the first row of this shard's weight
  std::int64_t vocab_local = 0;   // rows of this shard's weight, V_local >= 1
  std::int64_t vocab_global = 0;  // V_global; 0 means vocab_start + vocab_local
  std::int64_t valid_vocab = 0;   // ids at or past it are padding; 0 means vocab_global
  DType dtype = DType::kBF16;     // of hidden and weight: bf16, fp16 or fp32
  std::optional<DType> bias_dtype;  // set when a bias is passed; any float dtype
  DType target_dtype = DType::kInt64;  // int32 or int64
  std::int64_t ignore_index = -100;    // rows with this target give logp 0
  float temperature = 1.0f;            // > 0
  bool want_entropy = false;
  bool allow_tf32 = false;  // fp32 inputs may use TF32 matrix math (the current fp32 path is exact fp32 FMA either way)
  bool strict = false;      // check the device status word after every call (synchronizes)
  int device = 0;           // CUDA device ordinal the op runs on
  // The workspace is sized for this many rows at build (at most the rows one call takes:
  // 65535 x the forward tile's rows, 8,388,480 with 128-row tiles); 0: grows on demand.
  std::int64_t max_rows = 0;

  // Backward (LinearLogp::backward). Its kernels are compiled or loaded at build only when
  // want_backward is set, so that inference-only ops do not pay for them.
  bool want_backward = false;
  // grad_weight (and grad_bias) in fp32 rather than in the weight's (bias's) dtype. Either way
  // they are accumulated in fp32 over the whole batch and rounded once.
  bool grad_weight_fp32 = false;
  // Keep dZ, the logit gradient between the kernels, in fp32 rather than in the 16-bit dtype of
  // hidden and weight: slower (fp32 FMA instead of tensor cores), for checking accuracy. fp32
  // ops always keep it in fp32.
  bool dz_fp32 = false;
  // Bytes the dZ chunk may take (N x chunk columns); 0 means 256 MiB. More rows than fit one
  // column of dZ tiles in it (256 columns wide for bf16 / fp16 on H100, H200 and A100, 128 for
  // fp32) are refused with a clear error, except by an op that keeps chunks (below) whose whole
  // shard fits this plus the keep budget (keep_logits_bytes).
  std::int64_t backward_workspace_bytes = 0;
  // Bytes the op may add to keep logits between a forward and its backward, beyond the dZ buffer
  // and the grad_hidden accumulator (which hold the first one or two kept vocabulary chunks at no
  // extra cost: the second where a chunk is at most 2 x hidden columns, about 16k rows and more
  // at hidden 4096): each further chunk kept is one recompute of its logits fewer in the
  // backward, for about N x chunk columns x 2 bytes (about backward_workspace_bytes) each. The
  // forward keeps as many chunks as fit, always one fewer than the call has; where the whole
  // shard of dZ fits backward_workspace_bytes + the keep budget it is one chunk, kept whole, in a
  // dZ buffer that may then be larger than backward_workspace_bytes: the dZ and keep buffers
  // share that sum. Only ops that keep chunks at all use it (single GPU, 16-bit dZ, the Hopper
  // dZ kernel, no gradient filter).
  //   kKeepLogitsAuto (the default): the keep budget is what holds the dZ budget, the
  //     accumulator (N x H x 4 bytes for the most rows the op's calls have had, allocated or
  //     not) and the keep buffer within 1 GiB together, and at least 256 MiB: 768 MiB less
  //     N x H x 4 with the default dZ budget. A whole shard as one chunk needs no accumulator,
  //     so a fresh op takes up to 1 GiB of dZ as one chunk (a 128k vocabulary at 4096 rows); the
  //     floor holds from 16384 rows at hidden 8192. A call of more rows than any before frees a
  //     keep or dZ buffer that the smaller budget no longer allows (a synchronization; during
  //     graph capture refused as a growth is); an op with max_rows then reserves the keep
  //     buffer anew.
  //   >= 0: that many bytes; 0: no more than the ones in place.
  // With max_rows set, what calls of up to max_rows rows can use of it is allocated at build
  // (none where they have at most two chunks), and a whole shard is one chunk only where a call
  // of max_rows rows is one.
  std::int64_t keep_logits_bytes = kKeepLogitsAuto;
  // Gradient filtering, off (0) by default and then exact. When > 0, a tile of dZ (the dZ
  // kernel's block tile: 128 x 256 on H100/H200 and A100, 64 x 256 on GPUs with about 100 KiB of
  // shared memory per block) whose entries all have |dZ| < grad_filter_threshold (in the units of
  // dZ, the gradient with respect to a logit before the temperature) is dropped, and the GEMMs
  // skip it. Each dropped
  // entry changes grad_hidden[i, :] by at most threshold * |W[v, :]| and grad_weight[v, :] by at
  // most threshold * |X[i, :]|; tiles near the threshold make the result and the run time
  // depend on the data. The dropped tiles are zeros in grad_bias too.
  float grad_filter_threshold = 0.0f;
};

struct LinearLogpInputs {
  MatrixView hidden;   // [N, H], config.dtype, rows 16-byte aligned
  MatrixView weight;   // [V_local, H], config.dtype, rows 16-byte aligned
  VectorView bias;     // [V_local], config.bias_dtype; data null when the op has no bias. -inf forbids its
                       // token: probability 0, and a target on it gets a finite logp below -1e29
  VectorView targets;  // [N], config.target_dtype, global ids
};

// fp32 vectors of N elements. logp is required; lse and entropy may be left null.
// Outputs share no memory with each other or with the inputs (refused otherwise), here and in
// LinearLogpGrads.
struct LinearLogpOutputs {
  VectorView logp;
  VectorView lse;
  VectorView entropy;  // needs config.want_entropy
};

// Gradients written by LinearLogp::backward. A view left with null data is not computed.
struct LinearLogpGrads {
  MatrixView hidden;  // [N, H], config.dtype; always overwritten (never accumulated)
  MatrixView weight;  // [V_local, H], fp32 if config.grad_weight_fp32, else config.dtype
  VectorView bias;    // [V_local], fp32 if config.grad_weight_fp32, else config.bias_dtype
  // true: grad_weight and grad_bias += this call's gradients (accumulation over micro-batches,
  // in fp32 before the one rounding to the output dtype); false: overwritten. With 16-bit
  // gradients each call rounds the running sum, so over many micro-batches small terms are lost:
  // set config.grad_weight_fp32 for an fp32 running sum (the op warns once otherwise).
  bool accumulate = false;
  // Tensor parallelism: true sums grad_hidden over the ranks (one all-reduce); false leaves it as
  // this rank's partial, the product over its own shard, for callers that reduce it themselves
  // (sequence parallelism). Every rank passes the same value. No effect on a single-GPU op.
  bool reduce_hidden = true;
};

// What the backward reads besides the forward's inputs: fp32 vectors of N elements.
struct LinearLogpBackwardInputs {
  VectorView lse;           // the forward's lse for these inputs; required
  VectorView entropy;       // the forward's entropy; required with grad_entropy, else unused
  VectorView grad_logp;     // upstream gradient of logp; null: zero
  VectorView grad_lse;      // upstream gradient of lse; null: zero
  VectorView grad_entropy;  // upstream gradient of entropy; null: zero. Needs config.want_entropy
};

// What the device recorded about target ids outside [0, valid_vocab) that were not ignore_index.
struct BadTargetReport {
  std::int64_t bad_rows = 0;      // rows seen since the last check
  std::int64_t first_bad_id = 0;  // the first bad id recorded (meaningful when bad_rows > 0)
};

class LinearLogp {
 public:
  // One GPU, the whole vocabulary: vocab_start is 0 and vocab_global 0 or vocab_local (a shard of a
  // larger vocabulary is an Error(kInvalidArgument): its log-sum-exp needs the other shards).
  LinearLogp(Runtime& runtime, const LinearLogpConfig& config);

  // Tensor parallel: this rank's shard of a vocabulary split over the ranks of `comm`, in rank
  // order (rank r holds ids [vocab_start, vocab_start + vocab_local); uneven shards are fine).
  // config.device must be the communicator's device. Every rank builds the op at the same time
  // (it is collective): the ranks exchange their layouts once, here, and check them with the same
  // code, so a layout that does not tile [0, vocab_global), or a hidden size, dtype,
  // valid_vocab, ignore_index, temperature, bias dtype, entropy or backward setting that differs
  // between ranks, raises the same Error(kInvalidArgument) on every rank; so does a failure to
  // build on any one rank. Nothing is re-checked per call.
  //
  // forward() then runs the fused kernel on the local shard and the combine kernel over the
  // per-row partials of all ranks in rank order, which it gets one of two ways: on the peer path
  // (every rank on one host, tp <= 8, config.max_rows set and N <= the smallest max_rows of the
  // ranks) the combine reads every rank's partials over NVLink and no collective runs; otherwise
  // ONE all-gather of the partials runs on the communicator's stream, ordered with `stream` by
  // events. Either way every rank gets the same logp, lse and entropy, bitwise. backward()
  // all-reduces grad_hidden (fp32, on the communicator's stream, while the last vocabulary
  // chunk's grad_weight is computed; unless grads.reduce_hidden is false); grad_weight and
  // grad_bias stay local. Every rank passes the same hidden and targets, makes the same calls in
  // the same order with the same row count N, and asks backward for grad_hidden alike, with the
  // same reduce_hidden (these are not checked per call: a rank that
  // differs leaves the others waiting until check() times out).
  //
  // CUDA graphs: forward and backward can be captured (no host synchronization, no allocation)
  // once the op is built and its buffers are sized: build every op (max_rows set to the largest
  // N, so no buffer grows during capture) on every rank before any rank captures or replays.
  // check() and strict mode wait on the host and cannot be captured: during a capture they throw
  // Error(kInvalidArgument) before enqueuing anything.
  //
  // Destruction is collective where the op attached the peer path (max_rows set, one host): every
  // rank destroys the op, like ReduceScatter; a rank that destroys it alone waits up to the
  // communicator's timeout, and the communicator is then aborted.
  LinearLogp(Runtime& runtime, const LinearLogpConfig& config, Communicator& comm);
  ~LinearLogp();
  LinearLogp(const LinearLogp&) = delete;
  LinearLogp& operator=(const LinearLogp&) = delete;

  // Enqueues the forward on `stream`. No host synchronization, unless config.strict or a call
  // has more rows than the workspace holds so far (set max_rows to size it when the op is built;
  // with want_backward this includes the backward's buffers, where a forward that writes lse may
  // leave logits for its backward).
  void forward(const LinearLogpInputs& inputs, const LinearLogpOutputs& outputs,
               StreamHandle stream);

  // Enqueues the backward on `stream` (needs config.want_backward).
  //
  // What: `inputs` are the forward's and backward_inputs.lse (and .entropy) its outputs for them,
  // which must not change in between; grad_logp, grad_lse and grad_entropy are the upstream
  // gradients of logp, lse and entropy, any of which may be left null (zero). With g = grad_logp,
  // h = grad_lse, e = grad_entropy, p = softmax(z) and H the entropy over the global vocabulary
  // and T the temperature, the gradient with respect to a logit of X W^T + b is
  //   dz_iv = (g_i [v = t_i] + (h_i - g_i) p_iv - e_i p_iv (z_iv - (lse_i - H_i))) / T,
  // and grads (LinearLogpGrads) get grad_hidden = dZ W, grad_weight = dZ^T X, grad_bias = the
  // column sums of dZ. Rows whose target is ignore_index or out of range, and padding columns,
  // get no gradient (the forward reports out-of-range targets: check()). Tensor parallel: lse
  // and entropy are the global ones every rank got from the forward, so each rank's dZ of its
  // shard is exact with no collective; grad_hidden is summed over the ranks unless
  // grads.reduce_hidden is false.
  //
  // Memory: never N x V beyond the budgets. Beyond the gradients, the op keeps for its next calls
  // a dZ buffer of at most backward_workspace_bytes (for an op that keeps chunks, dZ and keep
  // buffers of at most backward_workspace_bytes + the keep budget together, the keep buffer at
  // most the keep budget; by default the two and the accumulator within 1 GiB, or the dZ budget,
  // 256 MiB and the accumulator where those pass it) and, for 16-bit dtypes whose vocabulary takes
  // more than one chunk, an fp32 buffer of N x H (a band of logits longer on the Hopper path,
  // where it may hold logits the forward computed for the backward; docs/architecture.md, "The
  // backward kernels").
  //
  // Errors (Error(kInvalidArgument), naming the argument): an op built without want_backward; a
  // view of the wrong dtype, shape or alignment; grad_entropy on an op built without
  // want_entropy, or without entropy; a bias or grad_bias for an op without bias_dtype; a
  // gradient sharing memory with another or with an input; more rows than one column of dZ
  // tiles fits in backward_workspace_bytes (or, keeping chunks, than the whole shard fits in it
  // plus the keep budget).
  //
  // No host synchronization, unless a buffer has to grow (set max_rows to size them at build);
  // capturable in a CUDA graph.
  //
  // Deterministic: no floating-point atomics; every sum runs in a fixed order, so the same calls
  // give bitwise identical gradients (which training reproducibility and debugging need, and
  // which costs nothing here: every output element has one owner). There is no
  // non-deterministic mode. A backward that directly follows the forward of the same inputs
  // may reuse logits that forward computed for it, and then differs in rounding from one that
  // recomputes them, each repeatably.
  void backward(const LinearLogpInputs& inputs, const LinearLogpBackwardInputs& backward_inputs,
                const LinearLogpGrads& grads, StreamHandle stream);

  // The backward without entropy: backward(inputs, {lse, {}, grad_logp, grad_lse, {}}, grads, stream).
  void backward(const LinearLogpInputs& inputs, const VectorView& lse, const VectorView& grad_logp,
                const VectorView& grad_lse, const LinearLogpGrads& grads, StreamHandle stream);

  // Waits for `stream`, returns and clears the bad-target record. For a TP op the wait is
  // bounded by the communicator's timeout (then Error(kCommError), the communicator aborted);
  // every rank records the same bad rows.
  BadTargetReport check(StreamHandle stream);

  const LinearLogpConfig& config() const;

  // The main loop the op's forward logit kernel runs: "wgmma" (Hopper, sm_90a, 16-bit inputs,
  // unless RuntimeOptions::hopper_path is false), "mma.sync" (the portable tensor-core loop), or
  // "fp32 fma" (fp32 inputs). The backward's recompute of dZ runs the same, except where a tuning
  // record chose the portable loop for the forward on Hopper: dZ keeps wgmma there.
  const char* main_loop() const;

  // The internals, which the library's benchmarks read (the forward's plan of a call); not part
  // of the stable API.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardjit
