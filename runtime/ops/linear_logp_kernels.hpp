// Every kernel a LinearLogp op of a given layout loads. The op builds from this list and
// `shardjit prewarm` compiles from it, so a prewarmed cache always holds what the op asks for.
#pragma once

#include <optional>
#include <vector>

#include "runtime/compile/kernel_spec.hpp"
#include "runtime/ops/linear_logp_bwd_kernels.hpp"
#include "runtime/ops/linear_logp_fwd.hpp"
#include "runtime/ops/linear_logp_layout.hpp"

namespace shardjit {

struct LinearLogpKernels {
  FwdTile tile;
  KernelSpec fwd;
  std::vector<KernelSpec> combine;  // one per entry of kVocabSplitChoices, in that order
  std::optional<LinearLogpBwdKernels> backward;  // with config.want_backward
};

LinearLogpKernels linear_logp_kernels(const LinearLogpLayout& layout, const std::string& arch);

}  // namespace shardjit
