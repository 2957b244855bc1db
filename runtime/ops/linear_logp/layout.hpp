// A LinearLogp configuration checked and resolved once, when the op is built (and by prewarm,
// which must derive exactly the kernels the op will ask for).
#pragma once

#include <cstdint>
#include <string>

#include "shardjit/linear_logp.hpp"

namespace shardjit {

struct LinearLogpLayout {
  LinearLogpConfig config;         // with vocab_global and valid_vocab resolved
  std::int64_t valid_local = 0;    // columns of this shard before valid_vocab (0..vocab_local)
};

// Throws Error(kInvalidArgument) naming the field, its value and what is expected.
LinearLogpLayout resolve_layout(const LinearLogpConfig& config);

// resolve_layout for a single-GPU op, which holds the whole vocabulary: a shard of a larger one
// (vocab_start > 0, or vocab_global past the shard) would give a log-sum-exp over the shard alone,
// so it is refused, naming the tensor-parallel constructor that combines the shards.
LinearLogpLayout resolve_single_gpu_layout(const LinearLogpConfig& config);

// The `shardjit prewarm` command that builds the kernels of this op (one rank's shard, at
// `tp_degree`) for `arch`, preceded by the op's SHARDJIT_HOPPER_PATH (RuntimeConfig::hopper_path)
// where that changes the kernels.
std::string prewarm_command(const LinearLogpLayout& layout, const std::string& arch, bool hopper_path = true,
                            int tp_degree = 1);

}  // namespace shardjit
