#include "runtime/ops/linear_logp/bwd/state.hpp"

#include <algorithm>
#include <memory>

#include "gemm/gemm_layout.cuh"
#include "runtime/driver/stream.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/combine.hpp"
#include "runtime/ops/linear_logp/bwd/dz.hpp"
#include "runtime/sched/launch.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void check_smem(const char* what, unsigned bytes, const DeviceContext& device) {
  if (bytes > device.info().smem_per_block_optin) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("LinearLogp backward: the ") + what + " kernel needs " + std::to_string(bytes) +
                    " bytes of shared memory per block; device " + std::to_string(device.info().ordinal) + " (" +
                    device.info().name + ") allows " + std::to_string(device.info().smem_per_block_optin));
  }
}

}  // namespace

LinearLogpBwdState::LinearLogpBwdState(Runtime::Impl& runtime, const LinearLogpLayout& op_layout,
                                       const DeviceContext& op_device, const LinearLogpKernels& kernels)
    : layout(op_layout),
      device(op_device),
      specs(kernels.backward),
      bwd_chunk_waves(runtime.config.bwd_chunk_waves) {
  if (!specs) return;
  const LinearLogpConfig& c = layout.config;
  const unsigned dz_smem = linear_logp_bwd_dz_smem(c.dtype, specs->dz_tile);
  check_smem("dZ", dz_smem, device);
  // Each GEMM kernel's shared memory depends on its output's type (gemm_smem).
  struct Gemm {
    const char* name;
    const GemmKind* kind;
    std::shared_ptr<const LoadedKernel>* kernel;
  };
  const Gemm gemms[] = {{"grad_weight GEMM", &specs->grad_weight_kind, &grad_weight},
                        {"grad_hidden accumulating GEMM", &specs->grad_hidden_acc_kind, &grad_hidden_acc},
                        {"grad_hidden GEMM", &specs->grad_hidden_out_kind, &grad_hidden_out}};
  for (const Gemm& gemm : gemms) check_smem(gemm.name, gemm_smem(*gemm.kind, specs->gemm_tile), device);

  const std::string hint = prewarm_command(layout, device.arch(), runtime.config.hopper_path);
  auto load = [&](const KernelSpec& spec) { return runtime.load(spec, c.device, hint); };
  dz = load(specs->dz);
  allow_dynamic_smem(*dz, dz_smem);
  if (specs->scale) scale = load(*specs->scale);
  if (specs->bias) bias = load(*specs->bias);
  grad_weight = load(specs->grad_weight);
  grad_hidden_acc = load(specs->grad_hidden_acc);
  grad_hidden_out = load(specs->grad_hidden_out);
  if (specs->keep) {
    keep = load(*specs->keep);
    allow_dynamic_smem(*keep, dz_smem);  // the dZ kernel's layout
  }
  if (specs->kept_dz) kept_dz = load(*specs->kept_dz);
  if (specs->kept_dz_columns) kept_dz_columns = load(*specs->kept_dz_columns);
  for (const Gemm& gemm : gemms) allow_dynamic_smem(**gemm.kernel, gemm_smem(*gemm.kind, specs->gemm_tile));
  if (runtime.config.gemm_rows_as_n) {
    for (const LinearLogpBwdKernels::RowsAsN& tile : specs->grad_hidden_rows_as_n) {
      const GemmTile gemm_tile = gemm_rows_as_n_tile(tile.bm);
      RowsAsNKernels loaded{tile.bm, load(tile.acc), load(tile.out)};
      for (const auto& [kind, kernel] : {std::pair{&specs->grad_hidden_acc_kind, loaded.acc.get()},
                                         std::pair{&specs->grad_hidden_out_kind, loaded.out.get()}}) {
        check_smem("grad_hidden GEMM", gemm_smem(*kind, gemm_tile), device);
        allow_dynamic_smem(*kernel, gemm_smem(*kind, gemm_tile));
      }
      grad_hidden_rows_as_n.push_back(std::move(loaded));
    }
  }

  if (scale) scale_buffer = DeviceBuffer(device, 2 * sizeof(float));
  // The Hopper kernels split along K the tiles of grids whose last wave would leave many blocks
  // idle (templates/common/stream_k.cuh).
  if (specs->gemm_tile.tma || specs->dz_tile.wgmma) {
    split = StreamKWorkspace(device, std::max(specs->gemm_tile.bm * specs->gemm_tile.bn,
                                              specs->dz_tile.bm * specs->dz_tile.bn),
                             runtime.config.split_partial_waves, runtime.config.split_clusters);
    // The GEMMs split over a few row tiles run in clusters that share B (gemm/gemm_tma.cuh): how
    // many the device runs at once, for the kernel that takes the most shared memory. A filter's
    // GEMMs never cluster (launch_gemm), so its op plans none.
    if (specs->gemm_tile.tma && c.grad_filter_threshold <= 0.0f) {
      const Gemm* largest = &gemms[0];
      for (const Gemm& gemm : gemms) {
        if (gemm_smem(*gemm.kind, specs->gemm_tile) > gemm_smem(*largest->kind, specs->gemm_tile)) largest = &gemm;
      }
      LaunchShape shape;
      shape.block_x = static_cast<unsigned>(kernels::gemm_block_threads(true));
      shape.smem_bytes = gemm_smem(*largest->kind, specs->gemm_tile);
      split.measure_clusters(**largest->kernel, shape);
    }
  }
  if (c.max_rows > 0) {
    ScopedContext scope(device);
    reserve(reserve_chunks(c.max_rows), nullptr);
    reserve_keep_for_max_rows(nullptr);
    // Calls of fewer rows than max_rows may split their tiles; none allocates after the build.
    split.allocate();
  }
}

BackwardChunksInput backward_chunks_input(const LinearLogpConfig& c, const LinearLogpBwdKernels& specs, int resident,
                                          bool chunk_waves, std::int64_t n_rows, bool grad_hidden, bool whole,
                                          std::int64_t accumulator_held) {
  BackwardChunksInput input;
  input.n_rows = n_rows;
  input.hidden = c.hidden;
  input.vocab_local = c.vocab_local;
  input.dz_elem_bytes = dtype_size(specs.dz_dtype);
  input.tile_rows = specs.dz_tile.bm;
  input.tile_cols = specs.dz_tile.bn;
  input.budget = backward_workspace_budget(c);
  input.hidden_accumulator = grad_hidden && c.dtype != DType::kFP32;
  input.filter = c.grad_filter_threshold > 0.0f;
  const std::optional<BwdTileShape> gemm = specs.hopper_gemm_shape();
  if (chunk_waves && resident > 0 && specs.hopper_dz_shape() && gemm) {
    input.wave_resident = resident;
    input.gemm_tile = *gemm;
  }
  if (specs.keep && resident > 0) {
    input.keep_band_rows = kept_band_rows_for(c.hidden, specs.gemm_tile.bm, specs.gemm_tile.bn, resident);
    // Only shards whose forward can keep them whole: a source a dZ tile column for the combine.
    const std::int64_t tile_columns = (c.vocab_local + specs.dz_tile.bn - 1) / specs.dz_tile.bn;
    if (whole && tile_columns <= kMaxCombineSources) {
      input.whole_budget = whole_shard_budget(input, keep_logits_budget(c, accumulator_held), c.max_rows);
    }
  }
  return input;
}

BackwardChunksInput LinearLogpBwdState::chunks_input(std::int64_t n_rows, bool grad_hidden, bool whole) const {
  return backward_chunks_input(layout.config, *specs, split.resident_blocks(), bwd_chunk_waves, n_rows, grad_hidden,
                               whole, held().accumulator);
}

BackwardChunks LinearLogpBwdState::chunks_for(std::int64_t n_rows, bool grad_hidden) const {
  return backward_chunks(chunks_input(n_rows, grad_hidden));
}

BackwardChunks LinearLogpBwdState::chunks_on(std::int64_t n_rows, bool grad_hidden, CUstream stream) const {
  BackwardChunks plan = chunks_for(n_rows, grad_hidden);
  if (plan.chunks == 1 && plan.dz_bytes > dz_buffer.bytes() && stream_capture_id(stream) != 0) {
    plan = backward_chunks(chunks_input(n_rows, grad_hidden, false));
  }
  return plan;
}

bool LinearLogpBwdState::fits(std::int64_t n_rows) const {
  return backward_chunk_fits(chunks_input(n_rows, false));
}

BackwardChunks LinearLogpBwdState::reserve_chunks(std::int64_t max_rows) const {
  return backward_chunks_reserve(chunks_input(max_rows, true));
}

BackwardBuffers LinearLogpBwdState::held() const {
  BackwardBuffers bytes;
  bytes.dz = static_cast<std::int64_t>(dz_buffer.bytes());
  bytes.accumulator = static_cast<std::int64_t>(std::max(accumulator.bytes(), accumulator_planned));
  bytes.keep = static_cast<std::int64_t>(keep_buffer.bytes());
  return bytes;
}

BufferReleases LinearLogpBwdState::reserve(const BackwardChunks& chunks, CUstream stream, bool grow_accumulator) {
  const BackwardBufferBudget budget = backward_buffer_budget(layout.config, held(), chunks);
  const BufferReleases released{budget.release_dz, budget.release_keep};
  if (released.dz || released.keep) {
    // Only a call that plans more than any before lowers the budget; under capture that is a
    // call of a size no eager call had, refused as a growth would be.
    check_growth_outside_capture(stream, "LinearLogp: the dZ and keep buffers (a call of more rows than any "
                                         "before lowers their budget)");
    SHARDJIT_CU(cuStreamSynchronize(stream));  // queued work may still read the kept chunks
    if (released.dz) dz_buffer = DeviceBuffer();
    if (released.keep) keep_buffer = DeviceBuffer();
  }
  // A captured call changes nothing the next eager call would plan by.
  if (stream_capture_id(stream) == 0) accumulator_planned = std::max(accumulator_planned, chunks.accumulator_bytes);
  grow_buffer_for_stream(dz_buffer, chunks.dz_bytes, device, stream, "LinearLogp backward: the dZ chunk");
  if (grow_accumulator) {
    grow_buffer_for_stream(accumulator, chunks.accumulator_bytes, device, stream,
                           "LinearLogp backward: the grad_hidden accumulator");
  }
  grow_buffer_for_stream(mask, chunks.mask_bytes, device, stream, "LinearLogp backward: the filter mask");
  if (released.keep && layout.config.max_rows > 0) reserve_keep_for_max_rows(stream);
  return released;
}

void LinearLogpBwdState::reserve_keep_for_max_rows(CUstream stream) {
  if (!specs || !specs->keep) return;
  const BackwardChunks most = reserve_chunks(layout.config.max_rows);
  const std::int64_t bytes =
      keep_buffer_bytes_at_build(most, backward_workspace_budget(layout.config), keep_room(most));
  if (bytes > 0) {
    grow_buffer_for_stream(keep_buffer, static_cast<std::size_t>(bytes), device, stream, "LinearLogp: the keep buffer");
  }
}

std::int64_t LinearLogpBwdState::keep_room(const BackwardChunks& chunks) const {
  return backward_buffer_budget(layout.config, held(), chunks).keep_room;
}

namespace {

// Whether a kernel of a call of n_rows rows under `chunks` splits its tiles (backward_splits_tiles) on
// the resident blocks of `split`.
bool splits_tiles(const LinearLogpBwdState& bwd, const BackwardChunks& chunks, std::int64_t n_rows) {
  const LinearLogpBwdKernels& specs = *bwd.specs;
  const StreamKWorkspace& split = bwd.split;
  return backward_splits_tiles(chunks, n_rows, bwd.layout.config.hidden, specs.hopper_dz_shape(),
                               specs.hopper_gemm_shape(), split.resident_blocks(), split.partial_waves(),
                               split.clusters(), !bwd.grad_hidden_rows_as_n.empty(), bwd.device.info().l2_bytes);
}

}  // namespace

void LinearLogpBwdState::reserve_split(const BackwardChunks& chunks, std::int64_t n_rows, CUstream stream) {
  if (split.allocated() || split.resident_blocks() == 0) return;
  if (splits_tiles(*this, chunks, n_rows)) {
    check_growth_outside_capture(stream, "LinearLogp backward: the split-tile workspace");
    split.allocate();
  }
}

bool LinearLogpBwdState::holds(const BackwardChunks& chunks, std::int64_t n_rows, bool accumulator_too) const {
  return dz_buffer.bytes() >= chunks.dz_bytes && (!accumulator_too || accumulator.bytes() >= chunks.accumulator_bytes) &&
         mask.bytes() >= chunks.mask_bytes &&
         (split.allocated() || split.resident_blocks() == 0 ||
          !splits_tiles(*this, chunks, n_rows));
}

int LinearLogpBwdState::grad_hidden_rows_as_n_rows(std::int64_t m, std::int64_t k) const {
  if (grad_hidden_rows_as_n.empty()) return 0;
  return gemm_rows_as_n_rows(m, layout.config.hidden, k, split.resident_blocks(), split.partial_waves(),
                             split.clusters(), device.info().l2_bytes);
}

}  // namespace shardjit
