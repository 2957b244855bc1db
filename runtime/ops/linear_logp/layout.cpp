#include "runtime/ops/linear_logp/layout.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "runtime/ops/linear_logp/fwd.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "LinearLogp config: " + what);
}

constexpr std::int64_t kMaxShard = 2147483647;  // kernels index the shard with 32-bit ints

}  // namespace

LinearLogpLayout resolve_layout(const LinearLogpConfig& input) {
  LinearLogpConfig c = input;
  if (c.hidden <= 0 || c.hidden % 8 != 0 || c.hidden > 65536) {
    bad("hidden = " + std::to_string(c.hidden) + " is not supported; expected a multiple of 8 in 8..65536");
  }
  if (c.vocab_local < 1 || c.vocab_local > kMaxShard) {
    bad("vocab_local = " + std::to_string(c.vocab_local) + "; expected 1.." + std::to_string(kMaxShard));
  }
  // Ids of any vocabulary fit far below 2^62, and the sums below then cannot overflow.
  constexpr std::int64_t kMaxVocabId = std::int64_t{1} << 62;
  if (c.vocab_start < 0 || c.vocab_start > kMaxVocabId) {
    bad("vocab_start = " + std::to_string(c.vocab_start) + "; expected 0.." + std::to_string(kMaxVocabId));
  }
  if (c.vocab_global < 0 || c.vocab_global > kMaxVocabId) {
    bad("vocab_global = " + std::to_string(c.vocab_global) + "; expected 0 (vocab_start + vocab_local) up to " +
        std::to_string(kMaxVocabId));
  }
  if (c.vocab_global == 0) c.vocab_global = c.vocab_start + c.vocab_local;
  if (c.vocab_global < c.vocab_start + c.vocab_local) {
    bad("vocab_global = " + std::to_string(c.vocab_global) + " is smaller than vocab_start + vocab_local = " +
        std::to_string(c.vocab_start + c.vocab_local));
  }
  if (c.valid_vocab == 0) c.valid_vocab = c.vocab_global;
  if (c.valid_vocab < 1 || c.valid_vocab > c.vocab_global) {
    bad("valid_vocab = " + std::to_string(c.valid_vocab) + "; expected 1..vocab_global (" +
        std::to_string(c.vocab_global) + ")");
  }
  if (c.dtype != DType::kBF16 && c.dtype != DType::kFP16 && c.dtype != DType::kFP32) {
    bad(std::string("dtype = ") + dtype_name(c.dtype) + "; expected bf16, fp16 or fp32");
  }
  if (c.bias_dtype && !dtype_is_float(*c.bias_dtype)) {
    bad(std::string("bias_dtype = ") + dtype_name(*c.bias_dtype) + "; expected bf16, fp16 or fp32");
  }
  if (c.target_dtype != DType::kInt32 && c.target_dtype != DType::kInt64) {
    bad(std::string("target_dtype = ") + dtype_name(c.target_dtype) + "; expected int32 or int64");
  }
  // The kernels multiply by 1 / temperature: a subnormal one would make every logit infinite.
  if (!(c.temperature > 0.0f) || !std::isfinite(c.temperature) || !std::isfinite(1.0f / c.temperature)) {
    char value[32];
    std::snprintf(value, sizeof value, "%.9g", static_cast<double>(c.temperature));
    bad(std::string("temperature = ") + value + "; expected a finite value > 0 whose inverse is finite");
  }
  if (c.max_rows < 0) bad("max_rows = " + std::to_string(c.max_rows) + "; expected >= 0");
  if (c.device < 0) bad("device = " + std::to_string(c.device) + "; expected >= 0");

  LinearLogpLayout layout;
  layout.config = c;
  layout.valid_local = std::clamp<std::int64_t>(c.valid_vocab - c.vocab_start, 0, c.vocab_local);
  return layout;
}

LinearLogpLayout resolve_single_gpu_layout(const LinearLogpConfig& config) {
  LinearLogpLayout layout = resolve_layout(config);
  const LinearLogpConfig& c = layout.config;
  if (c.vocab_start != 0 || c.vocab_global != c.vocab_local) {
    bad("vocab_start = " + std::to_string(c.vocab_start) + ", vocab_local = " + std::to_string(c.vocab_local) +
        ", vocab_global = " + std::to_string(c.vocab_global) +
        ": a single-GPU op holds the whole vocabulary (vocab_start 0, vocab_global 0 or vocab_local); a shard of a "
        "larger one is built with the tensor-parallel constructor, whose ranks combine their shards");
  }
  return layout;
}

std::string prewarm_command(const LinearLogpLayout& layout, const std::string& arch, bool hopper_path,
                            int tp_degree) {
  const LinearLogpConfig& c = layout.config;
  // Where the Hopper switch chooses between two sets of kernels, the command names it, so that
  // it builds the op's set whatever the shell that runs it exports.
  const bool switch_matters = hopper_logit_tile(c.dtype, arch, true, 3).has_value();
  const std::string prefix = !switch_matters ? "" : hopper_path ? "SHARDJIT_HOPPER_PATH=1 " : "SHARDJIT_HOPPER_PATH=0 ";
  std::string command = prefix + "shardjit prewarm --hidden " + std::to_string(c.hidden) + " --vocab " +
                        std::to_string(c.vocab_global);
  if (c.valid_vocab != c.vocab_global) command += " --valid-vocab " + std::to_string(c.valid_vocab);
  command += " --shard " + std::to_string(c.vocab_start) + ":" + std::to_string(c.vocab_local);
  if (tp_degree > 1) command += " --tp " + std::to_string(tp_degree);
  command += std::string(" --dtype ") + dtype_name(c.dtype);
  command += std::string(" --targets ") + dtype_name(c.target_dtype);
  command += std::string(" --bias ") + (c.bias_dtype ? dtype_name(*c.bias_dtype) : "none");
  command += std::string(" --entropy ") + (c.want_entropy ? "on" : "off");
  if (c.want_backward) command += " --backward";
  if (c.want_backward && c.dz_fp32) command += " --dz-fp32";
  if (c.want_backward && c.grad_filter_threshold > 0.0f) command += " --grad-filter";
  command += " --arch " + arch;
  return command;
}

}  // namespace shardjit
