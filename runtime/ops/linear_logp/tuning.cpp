#include "runtime/ops/linear_logp/tuning.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "runtime/cache/sha256.hpp"
#include "runtime/compile/template_registry.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/linear_logp/impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kMaxCandidates = 3;
// Candidates are timed in interleaved rounds, so that the GPU's clocks, which ramp and drift as
// it warms up, weigh on every candidate alike: kWarmupRounds untimed rounds, then kTimedRounds
// rounds of kCallsPerRound calls of each candidate.
constexpr int kWarmupRounds = 2;
constexpr int kTimedRounds = 8;
constexpr int kCallsPerRound = 2;
// The timed calls rotate through up to this many input sets (hidden, weight and bias), so that a
// call finds its inputs in memory rather than in L2 where the call before left them.
constexpr std::size_t kMaxInputSets = 8;

void add_candidate(std::vector<FwdTile>& tiles, const FwdTile& tile) {
  if (tiles.size() < kMaxCandidates && std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) tiles.push_back(tile);
}

bool read_int(std::string_view& text, int& value, char end) {
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || ptr == text.data() + text.size() || *ptr != end) return false;
  text.remove_prefix(static_cast<std::size_t>(ptr - text.data()) + 1);
  return true;
}

// The median of the samples.
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One pseudo-random value of `dtype` with a magnitude in [2^-7, 1) and a random sign: no zeros,
// no subnormals, no infinities.
void random_element(DType dtype, std::uint64_t bits, unsigned char* out) {
  const auto sign = static_cast<std::uint32_t>(bits >> 63);
  const auto exponent_offset = static_cast<std::uint32_t>((bits >> 32) % 7);  // 2^-7 .. 2^-1
  const auto mantissa = static_cast<std::uint32_t>(bits);
  if (dtype == DType::kFP32) {
    const std::uint32_t value = sign << 31 | (120u + exponent_offset) << 23 | (mantissa & 0x7FFFFFu);
    std::memcpy(out, &value, 4);
  } else if (dtype == DType::kBF16) {
    const auto value = static_cast<std::uint16_t>(sign << 15 | (120u + exponent_offset) << 7 | (mantissa & 0x7Fu));
    std::memcpy(out, &value, 2);
  } else {
    const auto value = static_cast<std::uint16_t>(sign << 15 | (8u + exponent_offset) << 10 | (mantissa & 0x3FFu));
    std::memcpy(out, &value, 2);
  }
}

// Fills the buffer with pseudo-random elements of `dtype`: a 1 MiB pattern, copied over the rest.
// Never constants or zeros: data that toggles fewer bits draws less power, so the GPU would
// time the candidates at clocks a real call does not get.
void fill_random(const DeviceBuffer& buffer, DType dtype, std::uint64_t seed, CUstream stream) {
  if (buffer.bytes() == 0) return;
  const std::size_t element = dtype_size(dtype);
  const std::size_t pattern_bytes = std::min<std::size_t>(buffer.bytes(), std::size_t{1} << 20) / element * element;
  std::vector<unsigned char> pattern(pattern_bytes);
  for (std::size_t i = 0; i < pattern_bytes; i += element) random_element(dtype, splitmix64(seed), pattern.data() + i);
  SHARDJIT_CU(cuMemcpyHtoDAsync(buffer.ptr(), pattern.data(), pattern_bytes, stream));
  SHARDJIT_CU(cuStreamSynchronize(stream));  // the pattern is a local
  for (std::size_t done = pattern_bytes; done < buffer.bytes();) {
    const std::size_t bytes = std::min(done, buffer.bytes() - done);
    SHARDJIT_CU(cuMemcpyDtoDAsync(buffer.ptr() + done, buffer.ptr(), bytes, stream));
    done += bytes;
  }
}

// How the log names the op being tuned.
std::string describe(const LinearLogpLayout& layout) {
  const LinearLogpConfig& c = layout.config;
  return std::string("H=") + std::to_string(c.hidden) + " V_local=" + std::to_string(c.vocab_local) + " " +
         dtype_name(c.dtype);
}

}  // namespace

std::vector<FwdTile> fwd_tile_candidates(DType dtype, const std::string& arch, bool hopper_path) {
  std::vector<FwdTile> tiles{default_fwd_tile(dtype, arch, hopper_path)};
  if (dtype == DType::kFP32) return tiles;
  if (auto hopper = hopper_logit_tile(dtype, arch, hopper_path, 3)) add_candidate(tiles, *hopper);
  const unsigned limit = smem_limit_for_arch(arch);
  for (const FwdTile& tile : portable_fwd_tiles()) {
    if (linear_logp_fwd_smem(dtype, tile) <= limit) add_candidate(tiles, tile);
  }
  return tiles;
}

std::string fwd_tile_name(const FwdTile& tile) {
  return std::to_string(tile.bm) + "x" + std::to_string(tile.bn) + "x" + std::to_string(tile.bk) + "x" +
         std::to_string(tile.stages) + (tile.wgmma ? "-wgmma" : "-mma") + (tile.rows_as_n ? "-rows-as-n" : "");
}

std::optional<FwdTile> parse_fwd_tile_name(std::string_view name) {
  FwdTile tile;
  if (!read_int(name, tile.bm, 'x') || !read_int(name, tile.bn, 'x') || !read_int(name, tile.bk, 'x') ||
      !read_int(name, tile.stages, '-')) {
    return std::nullopt;
  }
  if (name == "wgmma" || name == "wgmma-rows-as-n") {
    tile.wgmma = true;
    tile.rows_as_n = name != "wgmma";
  } else if (name != "mma") {
    return std::nullopt;
  }
  return tile;
}

std::int64_t fwd_tuning_rows(const LinearLogpConfig& config) {
  if (config.max_rows <= 0) return 4096;
  std::int64_t rows = 64;
  while (rows < config.max_rows && rows < 16384) rows *= 2;
  return rows;
}

std::string fwd_tuning_key(const LinearLogpLayout& layout, const std::string& arch, const std::string& device_name,
                           bool hopper_path, std::int64_t rows, std::string_view kernel_source) {
  const LinearLogpConfig& c = layout.config;
  return "linear_logp_fwd tile; device=" + device_name + "; arch=" + arch + "; hopper_path=" +
         (hopper_path ? "1" : "0") + "; T=" + dtype_name(c.dtype) +
         "; BiasT=" + (c.bias_dtype ? dtype_name(*c.bias_dtype) : "none") + "; TargetT=" + dtype_name(c.target_dtype) +
         "; H=" + std::to_string(c.hidden) + "; V_LOCAL=" + std::to_string(c.vocab_local) +
         "; V_VALID=" + std::to_string(layout.valid_local) + "; ENTROPY=" + (c.want_entropy ? "1" : "0") +
         "; rows=" + std::to_string(rows) + "; source=" + sha256_hex(kernel_source).substr(0, 16);
}

std::string op_fwd_tuning_key(const Runtime::Impl& runtime, const LinearLogpLayout& layout, const DeviceContext& device) {
  // The candidates run on both forward kernels: a change to either retunes.
  const std::string sources = runtime.cache.flattened(find_template("linear_logp_fwd").file) +
                              runtime.cache.flattened(find_template("linear_logp_fwd_hopper").file);
  return fwd_tuning_key(layout, device.arch(), device.info().name, runtime.config.hopper_path,
                        fwd_tuning_rows(layout.config), sources);
}

std::size_t tuning_input_sets(std::size_t set_bytes, std::int64_t l2_bytes) {
  if (set_bytes == 0) return 1;
  const std::size_t span = 2 * static_cast<std::size_t>(std::max<std::int64_t>(l2_bytes, 0));
  return std::clamp<std::size_t>((span + set_bytes - 1) / set_bytes, 1, kMaxInputSets);
}

namespace {

// The timed calls' inputs: pseudo-random hidden, weight and bias, as many sets as span twice the
// L2, and targets spread over the shard's valid columns; one logp output.
struct TuningInputs {
  std::vector<DeviceBuffer> hidden, weight, bias;
  DeviceBuffer targets, logp;
  std::vector<LinearLogpInputs> sets;
  LinearLogpOutputs out;
};

void upload_tuning_targets(const LinearLogpLayout& layout, std::int64_t rows, const DeviceBuffer& targets,
                           CUstream stream) {
  const LinearLogpConfig& c = layout.config;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    ids[static_cast<std::size_t>(i)] = c.vocab_start + (i * 7919) % std::max<std::int64_t>(layout.valid_local, 1);
  }
  std::vector<std::int32_t> ids32(ids.begin(), ids.end());
  const void* id_bytes = c.target_dtype == DType::kInt32 ? static_cast<const void*>(ids32.data()) : ids.data();
  SHARDJIT_CU(cuMemcpyHtoDAsync(targets.ptr(), id_bytes, targets.bytes(), stream));
  SHARDJIT_CU(cuStreamSynchronize(stream));  // the ids are locals
}

TuningInputs make_tuning_inputs(const LinearLogpLayout& layout, DeviceContext& device, std::int64_t rows,
                                CUstream stream) {
  const LinearLogpConfig& c = layout.config;
  const std::size_t element = dtype_size(c.dtype);
  const std::size_t hidden_bytes = static_cast<std::size_t>(rows * c.hidden) * element;
  const std::size_t weight_bytes = static_cast<std::size_t>(c.vocab_local * c.hidden) * element;
  const std::size_t bias_bytes = c.bias_dtype ? static_cast<std::size_t>(c.vocab_local) * dtype_size(*c.bias_dtype) : 0;
  const std::size_t sets = tuning_input_sets(hidden_bytes + weight_bytes + bias_bytes, device.info().l2_bytes);
  TuningInputs t;
  for (std::size_t s = 0; s < sets; ++s) {
    t.hidden.emplace_back(device, hidden_bytes);
    t.weight.emplace_back(device, weight_bytes);
    t.bias.emplace_back(device, bias_bytes);
    fill_random(t.hidden.back(), c.dtype, 3 * s + 1, stream);
    fill_random(t.weight.back(), c.dtype, 3 * s + 2, stream);
    if (c.bias_dtype) fill_random(t.bias.back(), *c.bias_dtype, 3 * s + 3, stream);
  }
  t.targets = DeviceBuffer(device, static_cast<std::size_t>(rows) * dtype_size(c.target_dtype));
  t.logp = DeviceBuffer(device, static_cast<std::size_t>(rows) * sizeof(float));
  upload_tuning_targets(layout, rows, t.targets, stream);
  for (std::size_t s = 0; s < sets; ++s) {
    t.sets.push_back({{t.hidden[s].as<void>(), c.dtype, rows, c.hidden, 0},
                      {t.weight[s].as<void>(), c.dtype, c.vocab_local, c.hidden, 0},
                      {c.bias_dtype ? t.bias[s].as<void>() : nullptr, c.bias_dtype.value_or(DType::kFP32), c.vocab_local},
                      {t.targets.as<void>(), c.target_dtype, rows}});
  }
  t.out = LinearLogpOutputs{{t.logp.as<void>(), DType::kFP32, rows}, {}, {}};
  return t;
}

// Every candidate's op, forward only (the backward's kernels do not depend on the forward's
// tile); one that cannot be built on this device is left out. `names` gets the built ones' names.
std::vector<std::unique_ptr<LinearLogp::Impl>> candidate_ops(Runtime::Impl& runtime, const LinearLogpLayout& layout,
                                                             const std::vector<FwdTile>& candidates,
                                                             std::int64_t rows, std::vector<std::string>& names) {
  LinearLogpConfig forward_only = layout.config;
  forward_only.want_backward = false;
  forward_only.max_rows = rows;
  std::vector<std::unique_ptr<LinearLogp::Impl>> ops;
  for (const FwdTile& tile : candidates) {
    try {
      ops.push_back(std::make_unique<LinearLogp::Impl>(runtime, forward_only, 1, tile));
      names.push_back(fwd_tile_name(tile));
    } catch (const Error& e) {
      log().warn("tuning {}: candidate {} is left out: {}", describe(layout), fwd_tile_name(tile), e.what());
    }
  }
  return ops;
}

// Each op's median time a call (ms), over interleaved rounds.
std::vector<double> time_rounds(const std::vector<std::unique_ptr<LinearLogp::Impl>>& ops, const TuningInputs& inputs,
                                std::int64_t rows, DeviceContext& device, CUstream stream) {
  const std::int64_t hidden = ops.empty() ? 0 : ops.front()->layout.config.hidden;
  std::size_t calls_made = 0;  // the input set of the next call: calls_made % sets
  const auto next_call = [&] {
    return ForwardCall{inputs.sets[calls_made++ % inputs.sets.size()], inputs.out, rows, hidden, hidden, false, false};
  };
  // events[round][candidate] brackets that candidate's calls of that round.
  std::vector<std::vector<std::pair<OwnedEvent, OwnedEvent>>> events(kTimedRounds);
  for (int round = -kWarmupRounds; round < kTimedRounds; ++round) {
    for (const auto& op : ops) {
      if (round >= 0) {
        auto& pair = events[static_cast<std::size_t>(round)].emplace_back(OwnedEvent(device, true), OwnedEvent(device, true));
        SHARDJIT_CU(cuEventRecord(pair.first.get(), stream));
      }
      for (int i = 0; i < kCallsPerRound; ++i) op->enqueue_forward(next_call(), stream);
      if (round >= 0) SHARDJIT_CU(cuEventRecord(events[static_cast<std::size_t>(round)].back().second.get(), stream));
    }
  }
  SHARDJIT_CU(cuStreamSynchronize(stream));
  std::vector<double> times;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    std::vector<double> samples;
    for (const auto& round : events) {
      float ms = 0.0f;
      SHARDJIT_CU(cuEventElapsedTime(&ms, round[k].first.get(), round[k].second.get()));
      samples.push_back(static_cast<double>(ms) / kCallsPerRound);
    }
    times.push_back(median(std::move(samples)));
  }
  return times;
}

}  // namespace

TuningRecord time_fwd_tiles(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device,
                            const std::vector<FwdTile>& candidates, std::int64_t rows, std::string key) {
  ScopedContext scope(device);
  OwnedStream stream(device);
  const TuningInputs inputs = make_tuning_inputs(layout, device, rows, stream.get());
  std::vector<std::string> names;
  const std::vector<std::unique_ptr<LinearLogp::Impl>> ops = candidate_ops(runtime, layout, candidates, rows, names);
  const std::vector<double> times = time_rounds(ops, inputs, rows, device, stream.get());

  TuningRecord record;
  record.key = std::move(key);
  record.device = device.info().name;
  double best = 0.0;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const double ms = times[k];
    log().info("tuning {}: {} takes {:.4f} ms on {} rows", describe(layout), names[k], ms, rows);
    record.times_ms.emplace_back(names[k], ms);
    if (record.choice.empty() || ms < best) {
      record.choice = names[k];
      best = ms;
    }
  }
  return record;
}

std::vector<FwdTile> forceable_fwd_tiles(DType dtype, const std::string& arch, bool hopper_path) {
  std::vector<FwdTile> tiles = fwd_tile_candidates(dtype, arch, hopper_path);
  if (dtype == DType::kFP32) return tiles;
  for (const FwdTile& other : hopper_other_fwd_tiles(dtype, arch, hopper_path)) tiles.push_back(other);
  const unsigned limit = smem_limit_for_arch(arch);
  for (const FwdTile& tile : portable_fwd_tiles()) {
    if (linear_logp_fwd_smem(dtype, tile) <= limit && std::find(tiles.begin(), tiles.end(), tile) == tiles.end()) {
      tiles.push_back(tile);
    }
  }
  return tiles;
}

FwdTile forced_fwd_tile(const std::string& name, const std::vector<FwdTile>& candidates) {
  const std::optional<FwdTile> tile = parse_fwd_tile_name(name);
  std::string names;
  for (const FwdTile& candidate : candidates) {
    if (tile && candidate == *tile) return candidate;
    names += (names.empty() ? "" : ", ") + fwd_tile_name(candidate);
  }
  throw Error(ErrorCode::kInvalidArgument,
              "SHARDJIT_FWD_TILE='" + name + "' is not a forward tile of this op; expected one of " + names);
}

std::optional<FwdTile> tuned_fwd_tile(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device) {
  const LinearLogpConfig& c = layout.config;
  const std::string arch = device.arch();
  const bool hopper_path = runtime.config.hopper_path;
  const std::vector<FwdTile> candidates = fwd_tile_candidates(c.dtype, arch, hopper_path);
  if (!runtime.config.fwd_tile.empty()) {
    return forced_fwd_tile(runtime.config.fwd_tile, forceable_fwd_tiles(c.dtype, arch, hopper_path));
  }
  if (candidates.size() < 2) return std::nullopt;
  const std::int64_t rows = fwd_tuning_rows(c);
  const std::string key = op_fwd_tuning_key(runtime, layout, device);
  const auto candidate = [&](const std::string& name) -> std::optional<FwdTile> {
    for (const FwdTile& tile : candidates) {
      if (fwd_tile_name(tile) == name) return tile;
    }
    return std::nullopt;
  };

  if (std::optional<TuningRecord> record = runtime.load_tuning(key)) {
    if (std::optional<FwdTile> tile = candidate(record->choice)) {
      // Cache-only: the recorded tile's kernel was compiled where the record was made; a cache
      // that lacks it (copied without it, or pruned) falls back to the default tile rather than
      // refuse to build the op.
      if (!runtime.config.jit) {
        try {
          runtime.load(linear_logp_fwd_spec(layout, *tile), c.device, prewarm_command(layout, arch, hopper_path));
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kNotFound) throw;
          log().warn("LinearLogp {}: the tuning record's tile {} is not in the cache (cache-only); using the default",
                     describe(layout), record->choice);
          return std::nullopt;
        }
      }
      log().debug("LinearLogp {}: forward tile {} from the tuning record", describe(layout), record->choice);
      return tile;
    }
    log().warn("LinearLogp {}: the tuning record names tile '{}', which is not a candidate here; using the default",
               describe(layout), record->choice);
    return std::nullopt;
  }
  if (!runtime.config.autotune || !runtime.config.jit) return std::nullopt;

  try {
    TuningRecord record = time_fwd_tiles(runtime, layout, device, candidates, rows, key);
    if (record.choice.empty()) return std::nullopt;
    runtime.save_tuning(record);
    log().info("LinearLogp {}: tuned forward tile {} (recorded)", describe(layout), record.choice);
    return candidate(record.choice);
  } catch (const Error& e) {
    log().warn("LinearLogp {}: forward tile tuning failed, using the default tile: {}", describe(layout), e.what());
    return std::nullopt;
  }
}

}  // namespace shardjit
