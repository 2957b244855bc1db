// The LinearLogp op: built once (layout checked, kernels loaded, workspace sized), then each
// forward is two launches on the caller's stream: the fused GEMM + log-sum-exp kernel writing
// per-split partials, and the combine kernel merging them into logp / lse / entropy.
#include "shardjit/linear_logp.hpp"

#include <array>
#include <cstring>
#include <vector>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/linear_logp_fwd.hpp"
#include "runtime/ops/linear_logp_impl.hpp"
#include "runtime/ops/linear_logp_layout.hpp"
#include "runtime/ops/logp_combine.hpp"
#include "runtime/ops/view_checks.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

std::size_t split_index(int splits) {
  for (std::size_t i = 0; i < kVocabSplitChoices.size(); ++i) {
    if (kVocabSplitChoices[i] == splits) return i;
  }
  throw Error(ErrorCode::kInternal, "unexpected vocabulary split count " + std::to_string(splits));
}

void clear_status(const DeviceBuffer& status, CUstream stream) {
  SHARDJIT_CU(cuMemsetD8Async(status.ptr(), 0, sizeof(kernels::DeviceStatus), stream));
}

}  // namespace

LinearLogp::Impl::Impl(Runtime::Impl& rt, const LinearLogpConfig& config)
    : runtime(rt),
      layout(resolve_layout(config)),
      device(rt.device(layout.config.device)),
      kernels(linear_logp_kernels(layout, device.arch())),
      tile(kernels.tile) {
  const LinearLogpConfig& c = layout.config;
  smem_bytes = linear_logp_fwd_smem(c.dtype, tile);
  if (smem_bytes > device.info().smem_per_block_optin) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp needs " + std::to_string(smem_bytes) + " bytes of shared memory per block; device " +
                    std::to_string(c.device) + " (" + device.info().name + ") allows " +
                    std::to_string(device.info().smem_per_block_optin));
  }
  const std::string hint = prewarm_command(layout, device.arch());
  fwd = runtime.load(kernels.fwd, c.device, hint);
  allow_dynamic_smem(*fwd, smem_bytes);
  for (std::size_t i = 0; i < combine.size(); ++i) combine[i] = runtime.load(kernels.combine[i], c.device, hint);

  ScopedContext scope(device);
  status = DeviceBuffer(device, sizeof(kernels::DeviceStatus));
  clear_status(status, nullptr);
  if (c.max_rows > 0) ensure_workspace(workspace_rows_for(c.max_rows), nullptr);
  SHARDJIT_CU(cuStreamSynchronize(nullptr));
}

std::int64_t LinearLogp::Impl::workspace_rows_for(std::int64_t n_rows) const {
  // splits x rows peaks either at the largest row count or where splits are largest (small N).
  std::int64_t most = 0;
  for (std::int64_t rows = tile.bm; rows < n_rows + tile.bm; rows *= 2) {
    std::int64_t r = std::min(rows, n_rows);
    most = std::max(most, r * split_plan(r).splits);
  }
  return std::max(most, n_rows * split_plan(n_rows).splits);
}

SplitPlan LinearLogp::Impl::split_plan(std::int64_t n_rows) const {
  const std::int64_t row_bytes = layout.config.hidden * static_cast<std::int64_t>(dtype_size(layout.config.dtype));
  return choose_vocab_splits(n_rows, row_bytes, layout.valid_local, tile,
                             GpuShape{device.info().sm_count, device.info().l2_bytes});
}

void LinearLogp::Impl::ensure_workspace(std::int64_t partial_rows, CUstream stream) {
  const std::size_t bytes = static_cast<std::size_t>(partial_rows) * sizeof(kernels::RowPartial);
  if (bytes <= workspace.bytes()) return;
  // Work queued earlier may still read the old buffer.
  if (workspace.bytes() > 0) SHARDJIT_CU(cuStreamSynchronize(stream));
  log().debug("LinearLogp workspace grows to {} bytes", bytes);
  workspace = DeviceBuffer(device, bytes);
}

LinearLogp::LinearLogp(Runtime& runtime, const LinearLogpConfig& config)
    : impl_(std::make_unique<Impl>(runtime.impl(), config)) {}

LinearLogp::~LinearLogp() = default;

const LinearLogpConfig& LinearLogp::config() const { return impl_->layout.config; }

void LinearLogp::forward(const LinearLogpInputs& in, const LinearLogpOutputs& out, StreamHandle stream_handle) {
  Impl& op = *impl_;
  const LinearLogpConfig& c = op.layout.config;
  const std::int64_t n = in.hidden.rows;
  const std::int64_t hidden_stride = check_matrix(in.hidden, "hidden", c.dtype, -1, c.hidden);
  const std::int64_t weight_stride = check_matrix(in.weight, "weight", c.dtype, c.vocab_local, c.hidden);
  if (c.bias_dtype) {
    check_vector(in.bias, "bias", *c.bias_dtype, c.vocab_local, false);
  } else if (in.bias.data != nullptr) {
    throw Error(ErrorCode::kInvalidArgument, "bias: given, but the op was built without bias_dtype");
  }
  check_vector(in.targets, "targets", c.target_dtype, n, false);
  check_vector(out.logp, "logp", DType::kFP32, n, false);
  const bool has_lse = check_vector(out.lse, "lse", DType::kFP32, n, true);
  const bool has_entropy = check_vector(out.entropy, "entropy", DType::kFP32, n, true);
  if (has_entropy && !c.want_entropy) {
    throw Error(ErrorCode::kInvalidArgument, "entropy: requested, but the op was built with want_entropy = false");
  }
  if (n == 0) return;
  if ((n + op.tile.bm - 1) / op.tile.bm > 65535) {
    throw Error(ErrorCode::kInvalidArgument, "hidden: " + std::to_string(n) + " rows exceed the " +
                                                 std::to_string(65535 * op.tile.bm) + " one call supports; split the batch");
  }

  auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  const SplitPlan plan = op.split_plan(n);
  op.ensure_workspace(n * plan.splits, stream);

  kernels::LinearLogpFwdArgs fwd_args{};
  fwd_args.hidden = in.hidden.data;
  fwd_args.weight = in.weight.data;
  fwd_args.bias = c.bias_dtype ? in.bias.data : nullptr;
  fwd_args.targets = in.targets.data;
  fwd_args.partials = op.workspace.as<kernels::RowPartial>();
  fwd_args.n_rows = n;
  fwd_args.hidden_stride = hidden_stride;
  fwd_args.weight_stride = weight_stride;
  fwd_args.vocab_start = c.vocab_start;
  fwd_args.tiles_per_split = plan.tiles_per_split;
  fwd_args.inv_temperature = 1.0f / c.temperature;
  launch_linear_logp_fwd(*op.fwd, fwd_args, op.tile, plan.splits, op.smem_bytes, stream);

  kernels::LogpCombineArgs combine_args{};
  combine_args.partials = op.workspace.as<kernels::RowPartial>();
  combine_args.source_stride = n;
  combine_args.targets = in.targets.data;
  combine_args.logp = static_cast<float*>(out.logp.data);
  combine_args.lse = has_lse ? static_cast<float*>(out.lse.data) : nullptr;
  combine_args.entropy = has_entropy ? static_cast<float*>(out.entropy.data) : nullptr;
  combine_args.status = op.status.as<kernels::DeviceStatus>();
  combine_args.n_rows = n;
  combine_args.valid_vocab = c.valid_vocab;
  combine_args.ignore_index = c.ignore_index;
  launch_logp_combine(*op.combine[split_index(plan.splits)], combine_args, stream);

  if (c.strict) {
    BadTargetReport report = check(stream_handle);
    if (report.bad_rows > 0) {
      throw Error(ErrorCode::kDeviceStatus,
                  "LinearLogp: " + std::to_string(report.bad_rows) + " row(s) had a target outside [0, " +
                      std::to_string(c.valid_vocab) + ") that is not ignore_index (" +
                      std::to_string(c.ignore_index) + "); first bad id " + std::to_string(report.first_bad_id) +
                      "; their logp is NaN");
    }
  }
}

BadTargetReport LinearLogp::check(StreamHandle stream_handle) {
  Impl& op = *impl_;
  auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  kernels::DeviceStatus status{};
  SHARDJIT_CU(cuMemcpyDtoHAsync(&status, op.status.ptr(), sizeof(status), stream));
  clear_status(op.status, stream);
  SHARDJIT_CU(cuStreamSynchronize(stream));
  return BadTargetReport{status.bad_rows, status.first_bad_id};
}

}  // namespace shardjit
