// Tile autotuning of the LinearLogp forward. For a single-GPU op of a given shape, dtype and
// device, a few forward tiles (fwd_tile_candidates) are timed once on pseudo-random inputs of
// fwd_tuning_rows rows; the fastest is kept as a tuning record in the cache folder
// (runtime/cache/tuning_store.hpp, through Runtime::Impl), and every later op of that key, in this process or another,
// builds with it without timing again. Timing happens when an op is built with
// RuntimeConfig::autotune (SHARDJIT_AUTOTUNE=1) and JIT on, or through `shardjit prewarm --tune`;
// records are used whenever they exist. Tensor-parallel ops keep the default tile (the ranks
// agree on it before building) and the backward's kernels are not tuned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/driver/device.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "runtime/runtime_impl.hpp"

namespace shardjit {

// The tiles worth timing for dtype on arch, the default (default_fwd_tile) first: on sm_90a with
// the Hopper path the wgmma tile with four and with three stages and the portable tile; elsewhere
// the portable tiles that fit the arch's shared memory. fp32 has one.
std::vector<FwdTile> fwd_tile_candidates(DType dtype, const std::string& arch, bool hopper_path);

// A tile's name in records and logs, e.g. "128x256x64x4-wgmma" or "128x256x64x3-mma"; and back.
std::string fwd_tile_name(const FwdTile& tile);
std::optional<FwdTile> parse_fwd_tile_name(std::string_view name);

// The rows the candidates are timed with: the config's max_rows rounded up to a power of two
// (64 to 16384), or 4096 when the op was built without max_rows.
std::int64_t fwd_tuning_rows(const LinearLogpConfig& config);

// Input sets (hidden, weight, bias) the timed calls rotate through: enough that together they
// span twice the L2 of l2_bytes, so that no call finds its inputs in L2, at most 8; one where a
// set alone is that large (every standard shape's weight shard).
std::size_t tuning_input_sets(std::size_t set_bytes, std::int64_t l2_bytes);

// What a forward tuning record is kept under: everything the choice depends on, the candidates'
// code included (`kernel_source`: both forward templates as compiled, flattened), so that a record
// timed on kernels since changed is not taken for the current ones.
std::string fwd_tuning_key(const LinearLogpLayout& layout, const std::string& arch, const std::string& device_name,
                           bool hopper_path, std::int64_t rows, std::string_view kernel_source);

// The key of a single-GPU op of `layout` on `device` under the runtime's settings: the one
// tuned_fwd_tile reads and writes.
std::string op_fwd_tuning_key(const Runtime::Impl& runtime, const LinearLogpLayout& layout, const DeviceContext& device);

// The tiles SHARDJIT_FWD_TILE may name: the candidates, the Hopper loop's other tiles
// (hopper_other_fwd_tiles, which the rule picks per call rather than the tuner per op), and every
// portable tile that fits the arch's shared memory (the timed candidates stop at three).
std::vector<FwdTile> forceable_fwd_tiles(DType dtype, const std::string& arch, bool hopper_path);

// The tile SHARDJIT_FWD_TILE names (`name`), which must be one of `candidates`; throws
// Error(kInvalidArgument) naming the variable and the candidates otherwise.
FwdTile forced_fwd_tile(const std::string& name, const std::vector<FwdTile>& candidates);

// The forward tile of a single-GPU op of `layout` on `device`: SHARDJIT_FWD_TILE's where it is
// set (forced_fwd_tile), else the choice of its tuning record
// when the cache holds one (and it is still a candidate); else, with autotune and JIT on, the
// fastest candidate, timed now and recorded; else nullopt (the default tile). Never throws for
// a failed tuning: it is logged and the default tile is used.
std::optional<FwdTile> tuned_fwd_tile(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device);

// Times each candidate's forward (both launches; interleaved rounds, the median of eight) on
// `rows` rows of pseudo-random inputs, and returns the record naming the fastest. Candidates that
// cannot be built on the device are left out (logged).
TuningRecord time_fwd_tiles(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device,
                            const std::vector<FwdTile>& candidates, std::int64_t rows, std::string key);

}  // namespace shardjit
