// Kept chunks, both sides in one place. A LinearLogp forward that writes lse may compute the
// logits of its backward's first vocabulary chunks (one or two) in a kernel of their own
// (templates/linear_logp/fwd_keep.cuh) and leave them in the backward's buffers; the backward of
// the same inputs then turns them into dZ (bwd_kept_dz.cuh) instead of recomputing them. Here:
// whether an op keeps chunks at all, how many a forward call keeps, and whether a backward call
// may use what was kept (docs/architecture.md, "The backward kernels", says why and what it saves).
#pragma once

#include <cstdint>

#include "linear_logp/partials.cuh"
#include "runtime/ops/linear_logp/bwd/chunks.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit {

// kKeepLogitsAuto's rule: the dZ budget, the grad_hidden accumulator and the keep buffer within
// kAutoKeepTotalBytes together, the keep budget never below kAutoKeepFloorBytes (the fixed
// default it replaced, one chunk at the default dZ budget). A kept chunk saves most where the
// accumulator is small: at 4097 rows the rule took 3.85-3.90 x the GEMM to 3.28-3.38 x (whole
// shards) on an H100 (docs/benchmarks.md, "The keep budget follows the buffers"); the floor holds
// what the backward held before at 16384 rows of H 8192, 1.05 GiB beyond the gradients.
inline constexpr std::int64_t kAutoKeepTotalBytes = std::int64_t{1} << 30;
inline constexpr std::int64_t kAutoKeepFloorBytes = std::int64_t{256} << 20;

// The keep budget, in bytes, of an op of config `c` whose grad_hidden accumulator takes
// `accumulator_bytes`: c.keep_logits_bytes, or for kKeepLogitsAuto kAutoKeepTotalBytes less the
// dZ budget and the accumulator, at least kAutoKeepFloorBytes.
std::int64_t keep_logits_budget(const LinearLogpConfig& c, std::int64_t accumulator_bytes);

// The backward's buffers, in bytes, as an op holds them; the accumulator as the budgets count it
// (LinearLogpBwdState::held: at least the largest any call planned, grown or not).
struct BackwardBuffers {
  std::int64_t dz = 0;
  std::int64_t accumulator = 0;
  std::int64_t keep = 0;
};

// What the budgets allow an op of config `c` that holds `held` once a call of `chunks` reserved
// its buffers (which grow, never shrink, except as `release` says): the keep budget (of the
// larger of the held and the call's accumulator), and the dZ and keep buffers' shared cap, the
// dZ budget plus it. `release`: the held buffers that reserve frees first, a dZ buffer larger
// than both the call's and the cap (a whole shard grown before a larger call's accumulator
// lowered the cap), and a keep buffer larger than `keep_room`, what is left of the cap past the
// dZ buffer, at most the keep budget. After every call outside capture the dZ and keep buffers
// lie within the cap, so what the op holds passes the larger of 1 GiB and the dZ budget, the
// floor and the counted accumulator together; the counted accumulator only grows, so the cap only
// falls, and the same calls again free nothing (nor does a captured call of a size run before).
struct BackwardBufferBudget {
  std::int64_t keep_budget = 0;
  std::int64_t cap = 0;
  std::int64_t keep_room = 0;
  bool release_dz = false;
  bool release_keep = false;
};
BackwardBufferBudget backward_buffer_budget(const LinearLogpConfig& c, const BackwardBuffers& held,
                                            const BackwardChunks& chunks);

// The backward chunks a forward keeps in the buffers the backward has anyway: the first in the
// dZ buffer, and the second in the grad_hidden accumulator's memory where that can hold it
// (BackwardChunks::kept_band_rows). The chunks after those go to the keep buffer, whose size
// the keep budget (keep_logits_budget) bounds.
int chunks_kept_in_place(const BackwardChunks& chunks);
// "As many chunks as the op and the budget allow", for forward_launch.
inline constexpr int kAnyKeptChunks = 1 << 20;

// Bytes of one kept chunk's logits for n_rows rows: n_rows x dz_stride 16-bit values.
std::size_t kept_chunk_bytes(const BackwardChunks& chunks, std::int64_t n_rows);

// The most chunks a forward of n_rows rows under `chunks` may keep with `keep_bytes` of keep
// buffer: the ones in place plus as many whole chunks as the keep buffer holds.
int kept_chunks_budget(const BackwardChunks& chunks, std::int64_t n_rows, std::int64_t keep_bytes);

// The keep buffer an op with max_rows allocates at build, of its `keep_bytes`: what calls of up
// to max_rows rows can use, given `most`, the chunks of max_rows rows (backward_chunks_reserve),
// and `chunk_budget`, the dZ budget that bounds every chunk. A call keeps at most all its chunks
// but one (one is always recomputed) and takes the keep buffer for those past the ones in place;
// fewer rows have as many chunks or fewer, so most.chunks - 1 - chunks_kept_in_place(most) bound
// every call's (a call with fewer chunks than max_rows has at least one fewer, and at most one
// fewer in place).
std::int64_t keep_buffer_bytes_at_build(const BackwardChunks& most, std::int64_t chunk_budget,
                                        std::int64_t keep_bytes);

// Whether an op keeps chunks from its forward: a single-GPU op (tp = 1) whose dZ kernel runs the
// Hopper loop, with a 16-bit dZ (the kept fp16 values turn into it in place) and no filter (whose
// tile mask only the dZ kernel writes). TP ops keep nothing: their partials are gathered across
// the ranks, which would carry the kept chunk's sources too (32 more a row at llama3-8b-16k),
// and their plans are agreed between the ranks; not built or measured there.
bool op_keeps_chunks(const LinearLogpConfig& config, const FwdTile& dz_tile, DType dz_dtype, int tp);

// How many chunks a forward may keep, at most `most`, by the backward's chunks of its rows
// alone. A single chunk (calls of few rows: the whole shard is one chunk of dZ) is kept whole:
// by the kept chunk's kernel, which then computes every column, or by the forward kernel where
// it runs tiles of the rows as N (ForwardLaunch::forward_keeps). Of
// several chunks none where a chunk does not end on a forward tile (of fwd_tile_cols columns) or
// before the valid columns do; otherwise up to `most` (which kept_chunks_budget bounds by the
// room in place and in the keep buffer), as many as end before the valid columns do (the forward
// kernel keeps at least one column, and the backward at least one chunk that it recomputes).
int keepable_chunks(const BackwardChunks& chunks, std::int64_t valid_local, int fwd_tile_cols, int most);

// A single-GPU forward call's launch: the forward kernel's vocabulary split over the shard's
// columns from kept_cols on, and the backward's first kept_chunks chunks, columns [0, kept_cols),
// which the kept chunk's kernel computes instead (0: none). The combine merges the splits'
// sources, then a source per column tile of the kept chunks. Where the kept chunks hold every
// column (a single chunk kept whole), the forward kernel does not run, unless its plan for the
// call, among the tiles with a keeping kernel (LinearLogp::Impl::keeping_plan_tiles: none of 256
// columns of the rows as N), is in tiles of the rows as N: that tile's keeping kernel
// (LinearLogpKernels::keeping_fwd) then runs instead and keeps the chunk itself (forward_keeps,
// templates/linear_logp/fwd_column_keep.cuh), its split's sources the only ones, the chunk's
// tile maxima in kept_max_tiles slots after them.
struct ForwardLaunch {
  VocabSplit split;
  bool forward_kernel = true;
  int kept_chunks = 0;
  std::int64_t kept_cols = 0;
  int kept_tiles = 0;
  // With kept chunks: the backward's chunks of these rows (with grad_hidden), whose accumulator
  // the keep budget counts whether or not the forward writes it.
  BackwardChunks chunks;
  // The second kept chunk goes to the accumulator, which the forward then grows; otherwise the
  // accumulator is the backward's to grow.
  bool writes_accumulator = false;
  // Bytes of the keep buffer the chunks from the third on take (kept_chunk_bytes each).
  std::size_t keep_buffer_bytes = 0;
  // With kept chunks: the capture sequence the forward is enqueued in (stream_capture_id; 0: none).
  std::uint64_t capture = 0;

  // The forward kernel keeps the single chunk (tiles of the rows as N), with its tile maxima in
  // kept_max_tiles slots of n rows (kKeptColumnTileCols columns each) after the sources.
  bool forward_keeps = false;
  int kept_max_tiles = 0;

  int forward_sources() const { return forward_kernel ? split.sources() : 0; }
  // The first shard column of the forward kernel's split.
  std::int64_t forward_first_col() const { return forward_keeps ? 0 : kept_cols; }
  int sources() const { return forward_sources() + kept_tiles; }
  // Slots of n rows of the partials workspace the call takes.
  int partial_slots() const { return sources() + kept_max_tiles; }
};

// Whether a forward call that keeps its single chunk whole may keep it in the forward kernel, of
// plan `split` (forward_keeps): where the plan is in tiles of the rows as N, which cover every
// column in tiles of about the call's rows where the kept chunk's kernel reads 128-row tiles, of
// 128 columns (kKeptColumnTileCols: the 256-column tiles have no keeping kernel, fwd_tile_keeps).
// Whether the op has that tile's keeping kernel is find_fwd's to say (168 rows with entropy: none).
bool forward_keeps_whole_chunk(const BackwardChunks& chunks, int kept_chunks, const VocabSplit& split);

// What an op's last forward kept for its backward: the first chunk's logits in the dZ buffer,
// maybe the second's in the grad_hidden accumulator (BackwardChunks::kept_band_rows), and their
// tile maxima in `partials`, for these inputs. A backward whose inputs are these (the same
// buffers, lse the forward's output) uses them; the contract that a backward's inputs are its
// forward's, unchanged, is the one lse already sets.
struct KeptChunk {
  const void* hidden = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  const float* lse = nullptr;
  std::int64_t n = 0;
  std::int64_t hidden_stride = 0;
  std::int64_t weight_stride = 0;
  std::int64_t cols = 0;  // the chunk's columns, [0, cols) of the shard
  const void* dz = nullptr;  // the dZ buffer they are in (a later growth would move it)
  // The second chunk's logits, [n][dz stride] at BackwardChunks::accumulator_kept_offset of the
  // accumulator, whose address is `accumulator` (a growth would move it); null: only the first
  // chunk was kept.
  void* second = nullptr;
  const void* accumulator = nullptr;
  // Chunks further_begin .. further_begin + further_chunks - 1, one after the other
  // (kept_chunk_bytes each) in the keep buffer, whose address is `keep_buffer` (a growth would
  // move it); further_begin is chunks_kept_in_place of the forward's chunks, 1 or 2.
  void* further = nullptr;
  int further_begin = 2;
  int further_chunks = 0;
  const void* keep_buffer = nullptr;
  kernels::RowPartial* partials = nullptr;  // [kept columns / tile_cols][n], the first chunk's tiles first
  int tile_cols = 0;  // the kept tiles' columns: the dZ tile's, or kKeptColumnTileCols (forward_keeps)
  // The capture sequence the forward was enqueued in (stream_capture_id; 0: none): a backward
  // uses the chunk only from the same one, eager after eager or within one graph, whose replays
  // then run the two in the order of the calls.
  std::uint64_t capture = 0;
};

// A backward call as the kept chunks are matched against it: its inputs (bias null for an op
// without one), its capture sequence, and its buffers after they were reserved for its chunks.
struct BackwardKeptMatch {
  const void* hidden = nullptr;
  const void* weight = nullptr;
  const void* bias = nullptr;
  const float* lse = nullptr;
  std::int64_t n = 0;
  std::int64_t hidden_stride = 0;
  std::int64_t weight_stride = 0;
  bool grad_hidden = false;
  std::uint64_t capture = 0;
  const void* dz_buffer = nullptr;
  bool dz_buffer_grew = false;  // a growth loses what was kept
  const void* accumulator = nullptr;
  bool accumulator_grew = false;
  const void* keep_buffer = nullptr;
  bool keep_buffer_released = false;  // a reserve freed it (a new one may have its address)
};

// Which kept chunks a backward uses.
struct KeptChunksUse {
  bool first = false;   // chunk 0's logits, in the dZ buffer
  bool second = false;  // chunk 1's, in the accumulator: its grad_hidden product runs first, in bands
  int further_begin = 2;  // KeptChunk::further_begin
  int further = 0;        // chunks further_begin .. further_begin + further - 1, in the keep buffer

  bool uses(std::int64_t index) const {
    return (index == 0 && first) || (index == 1 && second) ||
           (index >= further_begin && index < further_begin + further);
  }
};

// The first chunk where it is this call's first chunk: kept by the forward of these buffers (lse
// its output) and rows, as wide as the call's first chunk, in the dZ buffer as it is now, and in
// the call's capture sequence. The second where the first is used, it was kept, the accumulator
// is as it was, the call has at least three chunks of the kept width, and its grad_hidden
// product (if asked for) can run in bands. The further ones where the first is used, the keep
// buffer is as it was (not freed by the call's reserve, at the same address), and the call has a
// chunk past them; they do not need the second, which lies elsewhere.
KeptChunksUse usable_kept_chunks(const KeptChunk& kept, const BackwardChunks& chunks, const BackwardKeptMatch& call);

}  // namespace shardjit
