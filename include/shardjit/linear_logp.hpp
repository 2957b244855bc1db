// LinearLogp: log-probabilities of given target tokens under an LM head z = (X W^T + b) / T,
// with the log-sum-exp and optionally the entropy of every row, without materializing the
// N x V logits. Built once per configuration (kernels are compiled or loaded then), called many
// times on the caller's stream.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "shardjit/dtype.hpp"
#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"

namespace shardjit {

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
  std::int64_t max_rows = 0;  // workspace is sized for this many rows at build; 0: grows on demand
};

struct LinearLogpInputs {
  MatrixView hidden;   // [N, H], config.dtype, rows 16-byte aligned
  MatrixView weight;   // [V_local, H], config.dtype, rows 16-byte aligned
  VectorView bias;     // [V_local], config.bias_dtype; data null when the op has no bias
  VectorView targets;  // [N], config.target_dtype, global ids
};

// fp32 vectors of N elements. logp is required; lse and entropy may be left null.
struct LinearLogpOutputs {
  VectorView logp;
  VectorView lse;
  VectorView entropy;  // needs config.want_entropy
};

// What the device recorded about target ids outside [0, valid_vocab) that were not ignore_index.
struct BadTargetReport {
  std::int64_t bad_rows = 0;      // rows seen since the last check
  std::int64_t first_bad_id = 0;  // the first bad id recorded (meaningful when bad_rows > 0)
};

class LinearLogp {
 public:
  LinearLogp(Runtime& runtime, const LinearLogpConfig& config);
  ~LinearLogp();
  LinearLogp(const LinearLogp&) = delete;
  LinearLogp& operator=(const LinearLogp&) = delete;

  // Enqueues the forward on `stream`. No host synchronization (unless config.strict).
  void forward(const LinearLogpInputs& inputs, const LinearLogpOutputs& outputs,
               StreamHandle stream);

  // Waits for `stream`, returns and clears the bad-target record.
  BadTargetReport check(StreamHandle stream);

  const LinearLogpConfig& config() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardjit
