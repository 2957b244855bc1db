// LinearLogp::Impl: the state an op keeps between calls (layout, loaded kernels, workspace,
// device status word). Shared by the files that implement the op's calls.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "linear_logp/partials.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp_bwd_state.hpp"
#include "runtime/ops/linear_logp_kernels.hpp"
#include "runtime/ops/linear_logp_layout.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

struct LinearLogp::Impl {
  Impl(Runtime::Impl& runtime, const LinearLogpConfig& config);

  void ensure_workspace(std::int64_t partial_rows, CUstream stream);
  std::int64_t workspace_rows_for(std::int64_t n_rows) const;
  SplitPlan split_plan(std::int64_t n_rows) const;

  Runtime::Impl& runtime;
  LinearLogpLayout layout;
  DeviceContext& device;
  LinearLogpKernels kernels;
  FwdTile tile;
  unsigned smem_bytes = 0;
  std::shared_ptr<const LoadedKernel> fwd;
  std::array<std::shared_ptr<const LoadedKernel>, kVocabSplitChoices.size()> combine{};
  DeviceBuffer workspace;  // RowPartial [splits][n_rows]
  DeviceBuffer status;     // kernels::DeviceStatus
  // The backward's kernels and buffers (empty without config.want_backward); built from the
  // members above, so it is declared after them.
  LinearLogpBwdState bwd{runtime, layout, device, kernels};
};

}  // namespace shardjit
