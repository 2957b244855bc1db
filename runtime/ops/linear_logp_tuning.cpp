#include "runtime/ops/linear_logp_tuning.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/logging.hpp"
#include "runtime/ops/linear_logp_impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

constexpr std::size_t kMaxCandidates = 3;
constexpr int kWarmupCalls = 2;
constexpr int kTimedCalls = 10;

void add_candidate(std::vector<FwdTile>& tiles, const FwdTile& tile) {
  const auto same = [&](const FwdTile& t) {
    return t.bm == tile.bm && t.bn == tile.bn && t.bk == tile.bk && t.stages == tile.stages && t.wgmma == tile.wgmma;
  };
  if (tiles.size() < kMaxCandidates && std::none_of(tiles.begin(), tiles.end(), same)) tiles.push_back(tile);
}

bool read_int(std::string_view& text, int& value, char end) {
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || ptr == text.data() + text.size() || *ptr != end) return false;
  text.remove_prefix(static_cast<std::size_t>(ptr - text.data()) + 1);
  return true;
}

// Median of the per-call times between consecutive events, in milliseconds.
double median_call_ms(const std::vector<OwnedEvent>& events) {
  std::vector<double> times;
  for (std::size_t i = 1; i < events.size(); ++i) {
    float ms = 0.0f;
    SHARDJIT_CU(cuEventElapsedTime(&ms, events[i - 1].get(), events[i].get()));
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
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
         std::to_string(tile.stages) + (tile.wgmma ? "-wgmma" : "-mma");
}

std::optional<FwdTile> parse_fwd_tile_name(std::string_view name) {
  FwdTile tile;
  if (!read_int(name, tile.bm, 'x') || !read_int(name, tile.bn, 'x') || !read_int(name, tile.bk, 'x') ||
      !read_int(name, tile.stages, '-')) {
    return std::nullopt;
  }
  if (name == "wgmma") {
    tile.wgmma = true;
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
                           bool hopper_path, std::int64_t rows) {
  const LinearLogpConfig& c = layout.config;
  return "linear_logp_fwd tile; device=" + device_name + "; arch=" + arch + "; hopper_path=" +
         (hopper_path ? "1" : "0") + "; T=" + dtype_name(c.dtype) +
         "; BiasT=" + (c.bias_dtype ? dtype_name(*c.bias_dtype) : "none") + "; TargetT=" + dtype_name(c.target_dtype) +
         "; H=" + std::to_string(c.hidden) + "; V_LOCAL=" + std::to_string(c.vocab_local) +
         "; V_VALID=" + std::to_string(layout.valid_local) + "; ENTROPY=" + (c.want_entropy ? "1" : "0") +
         "; rows=" + std::to_string(rows);
}

TuningRecord time_fwd_tiles(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device,
                            const std::vector<FwdTile>& candidates, std::int64_t rows, std::string key) {
  const LinearLogpConfig& c = layout.config;
  ScopedContext scope(device);
  // Constant inputs (every byte 0x3C: about 0.0115 in bf16 and fp32, 1.06 in fp16), targets 0:
  // the time of a tile does not depend on the values.
  const std::size_t element = dtype_size(c.dtype);
  DeviceBuffer hidden(device, static_cast<std::size_t>(rows * c.hidden) * element);
  DeviceBuffer weight(device, static_cast<std::size_t>(c.vocab_local * c.hidden) * element);
  DeviceBuffer bias(device, c.bias_dtype ? static_cast<std::size_t>(c.vocab_local) * dtype_size(*c.bias_dtype) : 0);
  DeviceBuffer targets(device, static_cast<std::size_t>(rows) * dtype_size(c.target_dtype));
  DeviceBuffer logp(device, static_cast<std::size_t>(rows) * sizeof(float));
  OwnedStream stream(device);
  SHARDJIT_CU(cuMemsetD8Async(hidden.ptr(), 0x3C, hidden.bytes(), stream.get()));
  SHARDJIT_CU(cuMemsetD8Async(weight.ptr(), 0x3C, weight.bytes(), stream.get()));
  if (bias.bytes() > 0) SHARDJIT_CU(cuMemsetD8Async(bias.ptr(), 0x3C, bias.bytes(), stream.get()));
  SHARDJIT_CU(cuMemsetD8Async(targets.ptr(), 0, targets.bytes(), stream.get()));

  const LinearLogpInputs in{{hidden.as<void>(), c.dtype, rows, c.hidden, 0},
                            {weight.as<void>(), c.dtype, c.vocab_local, c.hidden, 0},
                            {c.bias_dtype ? bias.as<void>() : nullptr, c.bias_dtype.value_or(DType::kFP32), c.vocab_local},
                            {targets.as<void>(), c.target_dtype, rows}};
  const LinearLogpOutputs out{{logp.as<void>(), DType::kFP32, rows}, {}, {}};
  const ForwardCall call{in, out, rows, c.hidden, c.hidden, false, false};
  // The forward alone: the backward's kernels do not depend on the forward's tile.
  LinearLogpConfig forward_only = c;
  forward_only.want_backward = false;
  forward_only.max_rows = rows;

  TuningRecord record;
  record.key = std::move(key);
  record.device = device.info().name;
  double best = 0.0;
  for (const FwdTile& tile : candidates) {
    const std::string name = fwd_tile_name(tile);
    try {
      LinearLogp::Impl op(runtime, forward_only, 1, tile);
      for (int i = 0; i < kWarmupCalls; ++i) op.enqueue_forward(call, stream.get());
      std::vector<OwnedEvent> events;
      for (int i = 0; i <= kTimedCalls; ++i) events.emplace_back(device, true);
      SHARDJIT_CU(cuEventRecord(events[0].get(), stream.get()));
      for (int i = 1; i <= kTimedCalls; ++i) {
        op.enqueue_forward(call, stream.get());
        SHARDJIT_CU(cuEventRecord(events[static_cast<std::size_t>(i)].get(), stream.get()));
      }
      SHARDJIT_CU(cuEventSynchronize(events.back().get()));
      const double ms = median_call_ms(events);
      log().info("tuning {}: {} takes {:.4f} ms on {} rows", describe(layout), name, ms, rows);
      record.times_ms.emplace_back(name, ms);
      if (record.choice.empty() || ms < best) {
        record.choice = name;
        best = ms;
      }
    } catch (const Error& e) {
      log().warn("tuning {}: candidate {} is left out: {}", describe(layout), name, e.what());
      SHARDJIT_CU(cuStreamSynchronize(stream.get()));
    }
  }
  SHARDJIT_CU(cuStreamSynchronize(stream.get()));
  return record;
}

std::optional<FwdTile> tuned_fwd_tile(Runtime::Impl& runtime, const LinearLogpLayout& layout, DeviceContext& device) {
  const LinearLogpConfig& c = layout.config;
  const std::string arch = device.arch();
  const bool hopper_path = runtime.config.hopper_path;
  const std::vector<FwdTile> candidates = fwd_tile_candidates(c.dtype, arch, hopper_path);
  if (candidates.size() < 2) return std::nullopt;
  const std::int64_t rows = fwd_tuning_rows(c);
  const std::string key = fwd_tuning_key(layout, arch, device.info().name, hopper_path, rows);
  const auto candidate = [&](const std::string& name) -> std::optional<FwdTile> {
    for (const FwdTile& tile : candidates) {
      if (fwd_tile_name(tile) == name) return tile;
    }
    return std::nullopt;
  };

  if (std::optional<TuningRecord> record = runtime.load_tuning(key)) {
    if (std::optional<FwdTile> tile = candidate(record->choice)) {
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
