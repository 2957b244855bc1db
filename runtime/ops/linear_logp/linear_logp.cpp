// The LinearLogp op: built once (layout checked, kernels loaded, workspace sized), then each
// forward runs on the caller's stream: the fused GEMM + log-sum-exp kernel writing per-split
// partials, which on the Hopper loop merges them into logp / lse / entropy itself where a row
// tile's merge is one pass of its threads (templates/linear_logp/fwd_merge.cuh), else a combine
// kernel after it does. A tensor-parallel op (built with a Communicator) runs the forward kernel
// and the combine kernel around one all-gather of the partials, or the combine reads its peers'
// (runtime/ops/linear_logp/tp/tp.cpp).
#include "shardjit/linear_logp.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "linear_logp/fwd_layout.cuh"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/ops/linear_logp/tp/tp.hpp"
#include "runtime/ops/linear_logp/tuning.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/view_checks.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void clear_status(const DeviceBuffer& status, CUstream stream) {
  SHARDJIT_CU(cuMemsetD8Async(status.ptr(), 0, sizeof(kernels::DeviceStatus), stream));
}

// The most rows one forward takes: its grid holds the row tiles in y, at most 65535 of them.
std::int64_t max_call_rows(const FwdTile& tile) { return 65535LL * tile.bm; }

// `tile`, once max_rows is known to be within what one call takes: sizing for more would only
// waste memory, and time (the workspaces are planned for every row count up to max_rows). Checked
// before the op builds anything.
const FwdTile& check_max_rows(const FwdTile& tile, std::int64_t max_rows) {
  if (max_rows > max_call_rows(tile)) {
    throw Error(ErrorCode::kInvalidArgument, "max_rows = " + std::to_string(max_rows) + "; expected at most " +
                                                 std::to_string(max_call_rows(tile)) +
                                                 ", the rows one call of this op takes");
  }
  return tile;
}

// Asks for every kernel of the op at once, forward and backward, so that those missing compile
// side by side; the loads that follow (here and in LinearLogpBwdState) find them in memory.
LinearLogpKernels prepared(Runtime::Impl& rt, LinearLogpKernels kernels, const LinearLogpLayout& layout,
                           const std::string& arch, int tp_degree) {
  std::vector<KernelSpec> specs{kernels.fwd, kernels.combine};
  if (kernels.peer_combine) specs.push_back(*kernels.peer_combine);
  for (const OtherFwdSpec& other : kernels.other_fwd) specs.push_back(other.spec);
  for (const OtherFwdSpec& keeping : kernels.keeping_fwd) specs.push_back(keeping.spec);
  if (kernels.backward) {
    for (const KernelSpec& spec : kernels.backward->all()) specs.push_back(spec);
  }
  const LinearLogpConfig& c = layout.config;
  const std::string what = "LinearLogp(hidden=" + std::to_string(c.hidden) + ", vocab_local=" +
                           std::to_string(c.vocab_local) + ", " + dtype_name(c.dtype) +
                           (kernels.backward ? ", with backward)" : ")");
  rt.prepare(specs, c.device, what, prewarm_command(layout, arch, rt.config.hopper_path, tp_degree));
  return kernels;
}

}  // namespace

LinearLogp::Impl::Impl(Runtime::Impl& rt, const LinearLogpConfig& config, int tp_degree,
                       std::optional<FwdTile> fwd_tile)
    : runtime(rt),
      layout(resolve_layout(config)),
      device(rt.device(layout.config.device)),
      kernels(prepared(rt,
                       linear_logp_kernels(layout, device.arch(), tp_degree, rt.config.hopper_path,
                                           fwd_tile ? fwd_tile : tuned_fwd_tile(rt, layout, device)),
                       layout, device.arch(), tp_degree)),
      tile(check_max_rows(kernels.tile, layout.config.max_rows)) {
  const LinearLogpConfig& c = layout.config;
  const unsigned smem_bytes = linear_logp_fwd_smem(c.dtype, tile);
  if (smem_bytes > device.info().smem_per_block_optin) {
    throw Error(ErrorCode::kInvalidArgument,
                "LinearLogp needs " + std::to_string(smem_bytes) + " bytes of shared memory per block; device " +
                    std::to_string(c.device) + " (" + device.info().name + ") allows " +
                    std::to_string(device.info().smem_per_block_optin));
  }
  const std::string hint = prewarm_command(layout, device.arch(), rt.config.hopper_path, tp_degree);
  fwd = runtime.load(kernels.fwd, c.device, hint);
  allow_dynamic_smem(*fwd, smem_bytes);
  for (const OtherFwdSpec& other : kernels.other_fwd) {
    other_fwd.push_back({other.tile, runtime.load(other.spec, c.device, hint)});
    allow_dynamic_smem(*other_fwd.back().kernel, linear_logp_fwd_smem(c.dtype, other.tile));
    // SHARDJIT_FWD_ROWS_AS_N=0 keeps the rows-as-N tiles out of the rule's choice, not out of the op.
    if (runtime.config.fwd_rows_as_n || !other.tile.rows_as_n) plan_tiles.push_back(other.tile);
  }
  for (const OtherFwdSpec& keeping : kernels.keeping_fwd) {
    keeping_fwd.push_back({keeping.tile, runtime.load(keeping.spec, c.device, hint)});
    allow_dynamic_smem(*keeping_fwd.back().kernel, linear_logp_fwd_smem(c.dtype, keeping.tile));
  }
  keeping_plan_tiles = keeping_fwd_plan_tiles(plan_tiles, c.want_entropy);
  combine = runtime.load(kernels.combine, c.device, hint);
  if (kernels.peer_combine) peer_combine = runtime.load(*kernels.peer_combine, c.device, hint);

  ScopedContext scope(device);
  status = DeviceBuffer(device, sizeof(kernels::DeviceStatus));
  clear_status(status, nullptr);
  if (tile.wgmma && tp_degree == 1) {
    // A counter for every row tile a call may have (256 KiB), zero, as every forward leaves them:
    // never grown, so a graph capture needs nothing of it.
    arrivals = DeviceBuffer(device, static_cast<std::size_t>(max_call_rows(tile) / tile.bm) * sizeof(unsigned int));
    SHARDJIT_CU(cuMemsetD8Async(arrivals.ptr(), 0, arrivals.bytes(), nullptr));
  }
  // A TP op keeps its partials in its own, gathered buffer (LinearLogpTp).
  if (c.max_rows > 0 && tp_degree == 1) ensure_workspace(workspace_rows_for(c.max_rows), nullptr);
  SHARDJIT_CU(cuStreamSynchronize(nullptr));
}

LinearLogp::Impl::~Impl() = default;

kernels::LinearLogpFwdArgs LinearLogp::Impl::fwd_args(const ForwardCall& call, kernels::RowPartial* partials,
                                                      const VocabSplit& plan) const {
  return linear_logp_fwd_args(layout, call.in, call.n, call.hidden_stride, call.weight_stride, partials, plan);
}

kernels::LogpCombineArgs LinearLogp::Impl::combine_args(const ForwardCall& call, const kernels::RowPartial* partials,
                                                        int sources) const {
  const LinearLogpConfig& c = layout.config;
  kernels::LogpCombineArgs args{};
  args.sources = sources;
  args.partials = partials;
  args.source_stride = call.n;
  args.targets = call.in.targets.data;
  args.logp = static_cast<float*>(call.out.logp.data);
  args.lse = call.has_lse ? static_cast<float*>(call.out.lse.data) : nullptr;
  args.entropy = call.has_entropy ? static_cast<float*>(call.out.entropy.data) : nullptr;
  args.status = status.as<kernels::DeviceStatus>();
  args.n_rows = call.n;
  args.valid_vocab = c.valid_vocab;
  args.ignore_index = c.ignore_index;
  return args;
}

const LoadedKernel& LinearLogp::Impl::peer_combine_kernel() const {
  if (!peer_combine) throw Error(ErrorCode::kInternal, "LinearLogp: no peer combine kernel loaded");
  return *peer_combine;
}

std::int64_t LinearLogp::Impl::workspace_rows_for(std::int64_t n_rows) const {
  // A forward without lse keeps nothing, one with lse keeps as many chunks as fit or, where they
  // do not, fewer (decide_forward_launch). The kept launches' sources are counted at each row tile's
  // largest row count, a best effort: their chunk width moves within a row tile, and a call whose
  // kept sources do not fit keeps fewer chunks.
  const auto sources_for = [this](std::int64_t rows) {
    int most = 0;
    const int kept = forward_launch(rows, kAnyKeptChunks).kept_chunks;
    for (int keep = 0; keep <= kept; ++keep) most = std::max(most, forward_launch(rows, keep).partial_slots());
    return most;
  };
  // A plan changes only where a row tile of one of the op's tiles starts: every such start is the
  // first row of a tile of that tile's height.
  std::int64_t most = max_partial_rows(n_rows, tile.bm, sources_for);
  for (const FwdKernel& other : other_fwd) {
    if (other.tile.bm != tile.bm) most = std::max(most, max_partial_rows(n_rows, other.tile.bm, sources_for));
  }
  return most;
}

VocabSplit LinearLogp::Impl::vocab_split(std::int64_t n_rows, std::int64_t first_col, bool keeps) const {
  const std::int64_t row_bytes = layout.config.hidden * static_cast<std::int64_t>(dtype_size(layout.config.dtype));
  const GpuShape gpu{device.info().sm_count, device.info().l2_bytes};
  if (runtime.config.fwd_splits > 0 && !tp) {  // an experiment's count (SHARDJIT_FWD_SPLITS)
    return cut_last_waves(fixed_vocab_splits(n_rows, layout.valid_local - first_col, tile, gpu, runtime.config.fwd_splits),
                          gpu.sm_count);
  }
  return choose_fwd_plan(n_rows, row_bytes, layout.valid_local - first_col, tile,
                         keeps ? keeping_plan_tiles : plan_tiles, gpu, first_col);
}

std::optional<FwdKernel> LinearLogp::Impl::find_fwd(const VocabSplit& plan, bool keeps) const {
  const auto runs = [&](const FwdKernel& k) {
    return k.tile.bm == plan.tile_rows && k.tile.bn == plan.tile_cols && k.tile.rows_as_n == plan.rows_as_n;
  };
  const std::vector<FwdKernel>& others = keeps ? keeping_fwd : other_fwd;
  if (!keeps && runs({tile, fwd})) return FwdKernel{tile, fwd};
  const auto found = std::ranges::find_if(others, runs);
  if (found == others.end()) return std::nullopt;
  return *found;
}

FwdKernel LinearLogp::Impl::fwd_of_plan(const VocabSplit& plan, bool keeps) const {
  if (const std::optional<FwdKernel> kernel = find_fwd(plan, keeps)) return *kernel;
  throw Error(ErrorCode::kInternal, "LinearLogp: a forward plan in " + std::to_string(plan.tile_rows) + " x " +
                                        std::to_string(plan.tile_cols) + " tiles" +
                                        (plan.rows_as_n ? " of the rows as N" : "") +
                                        (keeps ? " that keeps the backward's chunk" : "") +
                                        ", which the op has no kernel for");
}

KeptChunk LinearLogp::Impl::enqueue_kept_chunk(const ForwardCall& call, const ForwardLaunch& launch,
                                               kernels::RowPartial* partials, CUstream stream) {
  const BackwardChunks& chunks = launch.chunks;
  bwd.reserve(chunks, stream, launch.writes_accumulator);
  const FwdTile& dz_tile = bwd.specs->dz_tile;
  // Chunk 0 into the dZ buffer, chunk 1 into the accumulator's end where it holds it, the ones
  // after those into the keep buffer; a chunk's tile partials follow the ones of the chunk before.
  auto keep = [&](std::int64_t index, void* logits) {
    const BackwardChunk chunk = chunks.chunk(index);
    kernels::LinearLogpBwdDzArgs args =
        chunk_logit_args(layout, call.in, call.n, call.hidden_stride, call.weight_stride, logits,
                         chunks.dz_stride, chunk.begin, chunk.cols);
    args.tile_partials = partials + chunk.begin / dz_tile.bn * call.n;
    launch_linear_logp_bwd_dz(*bwd.keep, args, layout, dz_tile, DType::kFP16, bwd.split, stream);
  };
  KeptChunk kept;
  kept.hidden = call.in.hidden.data;
  kept.weight = call.in.weight.data;
  kept.bias = layout.config.bias_dtype ? call.in.bias.data : nullptr;
  kept.lse = static_cast<const float*>(call.out.lse.data);
  kept.n = call.n;
  kept.hidden_stride = call.hidden_stride;
  kept.weight_stride = call.weight_stride;
  kept.cols = chunks.chunk(0).cols;  // a single chunk ends at the shard's end
  kept.dz = bwd.dz_buffer.as<void>();
  kept.partials = partials;
  kept.tile_cols = launch.forward_keeps ? kernels::kKeptColumnTileCols : dz_tile.bn;
  kept.capture = launch.capture;
  // The split's slots too, as the backward of these rows will ask (a capture after this eager call
  // then grows nothing).
  bwd.reserve_split(chunks, call.n, stream);
  if (launch.forward_keeps) return kept;  // the forward kernel keeps it (fwd_column_keep.cuh)
  keep(0, bwd.dz_buffer.as<void>());
  kept.further_begin = chunks_kept_in_place(chunks);
  if (launch.kept_chunks >= 2 && kept.further_begin == 2) {
    kept.second = bwd.accumulator.as<char>() + chunks.accumulator_kept_offset;
    kept.accumulator = bwd.accumulator.as<void>();
    keep(1, kept.second);
  }
  if (launch.kept_chunks > kept.further_begin) {
    grow_buffer_for_stream(bwd.keep_buffer, launch.keep_buffer_bytes, device, stream, "LinearLogp: the keep buffer");
    kept.keep_buffer = bwd.keep_buffer.as<void>();
    kept.further = bwd.keep_buffer.as<void>();
    kept.further_chunks = launch.kept_chunks - kept.further_begin;
    const std::size_t chunk_bytes = kept_chunk_bytes(chunks, call.n);
    for (int i = 0; i < kept.further_chunks; ++i) {
      keep(kept.further_begin + i, bwd.keep_buffer.as<char>() + static_cast<std::size_t>(i) * chunk_bytes);
    }
  }
  return kept;
}

void LinearLogp::Impl::ensure_workspace(std::int64_t partial_rows, CUstream stream) {
  const std::size_t bytes = static_cast<std::size_t>(partial_rows) * sizeof(kernels::RowPartial);
  grow_buffer_for_stream(workspace, bytes, device, stream, "LinearLogp: the partials workspace");
}

void LinearLogp::Impl::enqueue_forward(const ForwardCall& call, CUstream stream) {
  // This call rewrites the partials (the kept chunk's tile maxima) and maybe the dZ buffer: what
  // an earlier forward kept is gone, from here on, whatever fails below.
  bwd.kept.reset();
  const ForwardLaunch launch = decide_forward_launch(call, stream);
  ensure_workspace(call.n * launch.partial_slots(), stream);
  kernels::RowPartial* partials = workspace.as<kernels::RowPartial>();
  std::optional<KeptChunk> kept;
  if (launch.kept_chunks > 0) kept = enqueue_kept_chunk(call, launch, partials + call.n * launch.forward_sources(), stream);
  const kernels::LogpCombineArgs merge = combine_args(call, partials, launch.sources());
  bool merged = false;
  if (launch.forward_kernel) {
    kernels::LinearLogpFwdArgs args = fwd_args(call, partials, launch.split);
    const FwdKernel plan_fwd = fwd_of_plan(launch.split, launch.forward_keeps);
    args.first_tile = static_cast<int>(launch.forward_first_col() / plan_fwd.tile.bn);
    if (launch.forward_keeps) {
      args.kept = bwd.dz_buffer.as<void>();
      args.kept_tile_max = kept->partials;
      args.kept_stride = launch.chunks.dz_stride;
      args.kept_cols = static_cast<int>(launch.chunks.dz_stride);  // the chunk's columns, rounded up to 8
    }
    // The Hopper kernel (the one op kind with counters) merges the partials itself where that pays
    // (fwd_merges_in_kernel), or where an experiment says (SHARDJIT_FWD_MERGE).
    const int forced = runtime.config.fwd_merge;
    merged = arrivals.bytes() > 0 &&
             (forced < 0 ? fwd_merges_in_kernel(call.n, plan_fwd.tile.bm, merge.sources) : forced == 1);
    if (merged) {
      check_combine_sources(merge);
      args.arrivals = arrivals.as<unsigned int>();
      args.combine = merge;
    }
    launch_linear_logp_fwd(*plan_fwd.kernel, args, launch.split, layout, plan_fwd.tile, stream);
  }
  if (!merged) launch_logp_combine(*combine, merge, stream);
  bwd.kept = kept;
}

LinearLogp::LinearLogp(Runtime& runtime, const LinearLogpConfig& config)
    : impl_(std::make_unique<Impl>(runtime.impl(), resolve_single_gpu_layout(config).config)) {}

LinearLogp::LinearLogp(Runtime& runtime, const LinearLogpConfig& config, Communicator& comm)
    : impl_(build_tp_linear_logp(runtime.impl(), config, comm.impl())) {}

LinearLogp::~LinearLogp() = default;

const LinearLogpConfig& LinearLogp::config() const { return impl_->layout.config; }

const char* LinearLogp::main_loop() const {
  if (impl_->tile.wgmma) return "wgmma";
  return impl_->layout.config.dtype == DType::kFP32 ? "fp32 fma" : "mma.sync";
}

void LinearLogp::forward(const LinearLogpInputs& in, const LinearLogpOutputs& out, StreamHandle stream_handle) {
  Impl& op = *impl_;
  const SingleCaller::Scope one_caller(op.calls, "LinearLogp::forward");
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
  check_no_overlap({span_of("logp", out.logp), span_of("lse", out.lse), span_of("entropy", out.entropy)},
                   {span_of("hidden", in.hidden), span_of("weight", in.weight), span_of("bias", in.bias),
                    span_of("targets", in.targets)});
  if (n == 0) return;
  if (n > max_call_rows(op.tile)) {
    throw Error(ErrorCode::kInvalidArgument, "hidden: " + std::to_string(n) + " rows exceed the " +
                                                 std::to_string(max_call_rows(op.tile)) +
                                                 " one call supports; split the batch");
  }

  auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  if (c.strict) {
    check_wait_outside_capture(stream, "LinearLogp::forward with strict = true (it reads the bad-target record)",
                               "build the op with strict = false for graphs, and call check() after a replay");
  }
  const ForwardCall call{in, out, n, hidden_stride, weight_stride, has_lse, has_entropy};
  if (op.tp) {
    op.tp->forward(op, call, stream);
  } else {
    op.enqueue_forward(call, stream);
  }

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
  const SingleCaller::Scope one_caller(op.calls, "LinearLogp::check");
  auto stream = static_cast<CUstream>(stream_handle);
  ScopedContext scope(op.device);
  check_wait_outside_capture(stream, "LinearLogp::check");
  // A TP op's stream may wait for a collective: wait for it within the communicator's timeout
  // first (the copy below would wait without a bound).
  if (op.tp) op.tp->wait(stream, "LinearLogp::check");
  kernels::DeviceStatus status{};
  SHARDJIT_CU(cuMemcpyDtoHAsync(&status, op.status.ptr(), sizeof(status), stream));
  clear_status(op.status, stream);
  SHARDJIT_CU(cuStreamSynchronize(stream));
  return BadTargetReport{status.bad_rows, status.first_bad_id};
}

}  // namespace shardjit
