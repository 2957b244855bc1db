// The part of LinearLogp::Impl that the backward keeps between calls: its loaded kernels and its
// device buffers (the dZ chunk, the fp32 grad_hidden accumulator, the filter mask, the dZ scale).
// Built with the op: kernels are loaded only when the config asks for the backward.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "linear_logp/partials.cuh"
#include "runtime/driver/device.hpp"
#include "runtime/driver/module.hpp"
#include "runtime/ops/linear_logp/bwd/kernels.hpp"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/keep.hpp"
#include "runtime/ops/linear_logp/kernels.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/sched/stream_k_workspace.hpp"

namespace shardjit {

// The buffers a LinearLogpBwdState::reserve freed before it grew the others.
struct BufferReleases {
  bool dz = false;
  bool keep = false;
};

// The chunk plan's input (backward_chunks) of a call of n_rows rows of an op of config `c` with
// backward kernels `specs`: `resident`, the blocks of a Hopper kernel that run at once
// (StreamKWorkspace), sizes the bands of a second kept chunk's product (kept_band_rows_for) and,
// with `chunk_waves` and Hopper kernels, the waves of the chunk width rule; `whole` false leaves
// out the whole shard as one chunk, which otherwise fits the dZ budget plus the keep budget of
// an accumulator of `accumulator_held` bytes (keep_logits_budget; LinearLogpBwdState::held).
// No device needed.
BackwardChunksInput backward_chunks_input(const LinearLogpConfig& c, const LinearLogpBwdKernels& specs, int resident,
                                          bool chunk_waves, std::int64_t n_rows, bool grad_hidden, bool whole = true,
                                          std::int64_t accumulator_held = 0);

struct LinearLogpBwdState {
  LinearLogpBwdState(Runtime::Impl& runtime, const LinearLogpLayout& layout, const DeviceContext& device,
                     const LinearLogpKernels& kernels);

  bool loaded() const { return dz != nullptr; }

  // backward_chunks_input for this op's config, kernels, resident blocks and chunk width rule.
  BackwardChunksInput chunks_input(std::int64_t n_rows, bool grad_hidden, bool whole = true) const;
  // The chunks of a call of n_rows rows (see backward_chunks); throws where the rows do not
  // fit the workspace budget, which fits() says without throwing.
  BackwardChunks chunks_for(std::int64_t n_rows, bool grad_hidden) const;
  // chunks_for's, for a backward call on `stream`: during graph capture, where no buffer may
  // grow, a whole shard that the dZ buffer does not hold already is taken in chunks of the dZ
  // budget instead (the forward, captured too, kept none of it: it keeps only what the buffers
  // hold).
  BackwardChunks chunks_on(std::int64_t n_rows, bool grad_hidden, CUstream stream) const;
  bool fits(std::int64_t n_rows) const;
  // What to reserve for every call of up to max_rows rows (see backward_chunks_reserve).
  BackwardChunks reserve_chunks(std::int64_t max_rows) const;

  // Grows the buffers to what `chunks` needs, the accumulator only with `grow_accumulator` (a
  // forward that keeps no chunk there leaves it to the backward; the budgets count it either
  // way). grow_buffer_for_stream: work queued on `stream` may still use the old buffers, so a
  // growth waits for it first; config.max_rows avoids it. First it frees what the budgets no
  // longer allow (backward_buffer_budget's release: a keep buffer past keep_room, a dZ buffer
  // grown for a whole shard before a larger call lowered the cap), after waiting for the stream;
  // an op with max_rows then takes the keep buffer its build would now reserve. Only a call that
  // plans a larger accumulator than any eager call before releases: during capture that is
  // refused like a growth (check_growth_outside_capture), and a captured call leaves
  // accumulator_planned alone. Returns what it freed.
  BufferReleases reserve(const BackwardChunks& chunks, CUstream stream, bool grow_accumulator = true);

  // The keep buffer's room for a call of `chunks` (backward_buffer_budget): the keep budget less
  // what the dZ buffer (as it is, or as the call grows it) holds past the dZ budget.
  std::int64_t keep_room(const BackwardChunks& chunks) const;

  // The dZ and keep buffers' bytes as the op holds them, and the accumulator's as the budgets
  // count it: as held, or as the largest any call's chunks planned (accumulator_planned).
  BackwardBuffers held() const;

  // An op with max_rows: the keep buffer that calls of up to max_rows rows can use, by the
  // budgets as the op's buffers now are (keep_buffer_bytes_at_build), grown on `stream`.
  void reserve_keep_for_max_rows(CUstream stream);

  // The tile rows of grad_hidden's product of m rows over k (a chunk's columns) on the tiles that
  // take the rows as N (gemm_rows_as_n_rows on the workspace's blocks and clusters), 0 for the
  // 128 x 256 tiles: always where the op has no such kernels.
  int grad_hidden_rows_as_n_rows(std::int64_t m, std::int64_t k) const;

  // Allocates the split-tile workspace when a kernel of a call of n_rows rows would split its
  // tiles (few rows, or a narrow chunk). Nothing queued can be using it yet: it is never freed.
  void reserve_split(const BackwardChunks& chunks, std::int64_t n_rows, CUstream stream);

  // Whether the buffers (dZ, the accumulator where `accumulator_too`, mask) and the split-tile
  // workspace hold what `chunks` of n_rows rows needs without growing (so reserve and
  // reserve_split would grow nothing).
  bool holds(const BackwardChunks& chunks, std::int64_t n_rows, bool accumulator_too = true) const;

  const LinearLogpLayout& layout;
  const DeviceContext& device;
  std::optional<LinearLogpBwdKernels> specs;
  bool bwd_chunk_waves = true;  // the chunk width rule (RuntimeConfig::bwd_chunk_waves)
  std::shared_ptr<const LoadedKernel> dz;
  std::shared_ptr<const LoadedKernel> scale;
  std::shared_ptr<const LoadedKernel> bias;
  std::shared_ptr<const LoadedKernel> grad_weight;
  std::shared_ptr<const LoadedKernel> grad_hidden_acc;
  std::shared_ptr<const LoadedKernel> grad_hidden_out;
  std::shared_ptr<const LoadedKernel> keep;     // the kept chunk's, where the op keeps one
  std::shared_ptr<const LoadedKernel> kept_dz;
  std::shared_ptr<const LoadedKernel> kept_dz_columns;  // for a chunk the forward's rows as N kept
  // grad_hidden's kernels on the tiles that take the rows as N, as specs->grad_hidden_rows_as_n;
  // none where the op runs the portable loop or with gemm_rows_as_n off.
  struct RowsAsNKernels {
    int bm;
    std::shared_ptr<const LoadedKernel> acc;
    std::shared_ptr<const LoadedKernel> out;
  };
  std::vector<RowsAsNKernels> grad_hidden_rows_as_n;
  DeviceBuffer dz_buffer;
  DeviceBuffer accumulator;
  // The largest accumulator a call's chunks (reserve's) asked for, grown or not: a forward that
  // keeps no chunk in it, or a backward without grad_hidden, leaves it to a later backward, and
  // the budgets count it all the same. It only grows, so that the budgets only shrink and the
  // buffers settle (keep.hpp, backward_buffer_budget).
  std::size_t accumulator_planned = 0;
  DeviceBuffer mask;
  DeviceBuffer scale_buffer;  // s, 1 / s
  // Kept chunks past the ones in place, at most keep_room (keep.hpp); empty where the op keeps
  // none there.
  DeviceBuffer keep_buffer;
  StreamKWorkspace split;     // the Hopper kernels' split tiles; unused on the portable path
  std::optional<KeptChunk> kept;  // set by a forward that kept chunks (keep.hpp), reset by the next call
  // Whether the op has said that accumulating into a 16-bit grad_weight rounds every call.
  std::atomic<bool> warned_16bit_accumulation{false};
};

}  // namespace shardjit
