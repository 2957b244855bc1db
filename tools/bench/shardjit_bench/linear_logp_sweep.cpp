// Runs the sweep: compiles every kernel of the grid first, measures the device memory's bandwidth,
// then times the points one by one, writes their rows as they come (each with its goal), and
// prints the worst points of each mode and the points that miss their goal.
#include "linear_logp_sweep.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "fwd_plan_row.hpp"
#include "hbm_bandwidth.hpp"

#include "runtime/compile/compile_pool.hpp"
#include "runtime/driver/device.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/linear_logp/bwd/state.hpp"
#include "runtime/ops/linear_logp/fwd.hpp"
#include "runtime/ops/linear_logp/keep.hpp"
#include "runtime/ops/linear_logp/layout.hpp"
#include "shardjit/prewarm.hpp"
#include "shardjit/shardjit.hpp"

namespace shardjit::bench {
namespace {

nlohmann::json point_fields(const SweepPoint& p) {
  nlohmann::json fields = {{"head", p.head}, {"tp", p.tp}, {"n", p.c.n}, {"hidden", p.c.hidden}, {"vocab", p.c.vocab},
                           {"dtype", dtype_name(p.c.dtype)}, {"mode", p.c.backward ? "fwd+bwd" : "fwd"}};
  // Only where set, so that rows of heads without padding match those written before the field.
  if (p.c.valid_vocab > 0) fields["valid_vocab"] = p.c.valid_vocab;
  return fields;
}

// Compiles the kernels of every op of the grid into the cache folder, one op per thread at a
// time, so that the points load them instead of waiting for NVRTC one kernel after another.
void compile_grid_kernels(const std::vector<SweepPoint>& points, int jobs) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, PrewarmConfig> ops;
  const std::string arch = DeviceContext(0).arch();
  for (const SweepPoint& p : points) {
    PrewarmConfig& config = ops[{p.c.hidden, p.c.vocab, p.c.valid_vocab, static_cast<int>(p.c.dtype)}];
    config.hidden = p.c.hidden;
    config.vocab = p.c.vocab;
    config.valid_vocab = p.c.valid_vocab;
    config.dtypes = {p.c.dtype};
    config.archs = {arch};
    config.backward = config.backward || p.c.backward;
    config.jobs = 1;
  }
  std::vector<PrewarmConfig> configs;
  for (auto& [key, config] : ops) configs.push_back(config);
  Runtime runtime;
  std::atomic<std::size_t> next{0};
  std::mutex report;
  std::size_t compiled = 0, cached = 0;
  const auto worker = [&] {
    for (std::size_t i = next++; i < configs.size(); i = next++) {
      const PrewarmResult result = prewarm(runtime, configs[i]);
      const std::lock_guard<std::mutex> lock(report);
      compiled += result.compiled;
      cached += result.cached;
      for (const std::string& failure : result.failures) std::fprintf(stderr, "sweep: compile failed: %s\n", failure.c_str());
    }
  };
  std::vector<std::thread> threads;
  const int workers = std::clamp<int>(jobs, 1, static_cast<int>(configs.size()));
  for (int w = 0; w < workers; ++w) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::fprintf(stderr, "sweep: %zu ops' kernels ready (%zu compiled, %zu from the cache)\n", configs.size(), compiled,
               cached);
}

// The ratio to the same-process GEMM a timed row must stay within (docs/benchmarks.md, "LinearLogp
// at every shape"): the forward 1.05 from 1024 rows, below that 1.10 or 1.10 times the time to
// read W once at the measured bandwidth (`w_read_ms`), whichever is larger; forward + backward 4.0
// from 1024 rows. None below 1024 rows for forward + backward, whose goal there is PyTorch's time
// (tools/bench/torch_compare.py).
std::optional<double> goal_ratio(const nlohmann::json& row) {
  const bool backward = row.value("mode", "") == "fwd+bwd";
  if (row.at("n").get<std::int64_t>() >= 1024) return backward ? 4.0 : 1.05;
  if (backward) return std::nullopt;
  const double gemm_ms = row.at("gemm_ms").get<double>();
  const double w_read_ms = row.value("w_read_ms", 0.0);
  return 1.10 * std::max(1.0, w_read_ms / gemm_ms);
}

// Adds a timed row's W read time at `hbm_gbps` and its goal (goal_ratio, meets_goal).
void add_goal(nlohmann::json& row, const SweepPoint& p, double hbm_gbps) {
  const double w_bytes = static_cast<double>(p.c.vocab) * static_cast<double>(p.c.hidden) *
                         static_cast<double>(dtype_size(p.c.dtype));
  row["hbm_gbps"] = hbm_gbps;
  row["w_read_ms"] = w_bytes / (hbm_gbps * 1e6);
  if (const std::optional<double> goal = goal_ratio(row)) {
    row["goal_ratio"] = *goal;
    row["meets_goal"] = row.at("ratio").get<double>() <= *goal;
  }
}

void print_worst(const std::vector<nlohmann::json>& rows, int worst) {
  for (const char* mode : {"fwd", "fwd+bwd"}) {
    std::vector<const nlohmann::json*> of_mode;
    for (const auto& row : rows) {
      if (row.value("mode", "") == mode && row.contains("ratio")) of_mode.push_back(&row);
    }
    if (of_mode.empty()) continue;
    std::sort(of_mode.begin(), of_mode.end(),
              [](const auto* a, const auto* b) { return a->at("ratio").template get<double>() > b->at("ratio").template get<double>(); });
    std::fprintf(stderr, "\nworst %s points (op time over the same-process GEMM):\n", mode);
    std::fprintf(stderr, "  %-22s %6s %6s %7s %5s %7s %7s %10s %10s\n", "head", "n", "hidden", "vocab", "dtype", "ratio",
                 "goal", "op ms", "gemm ms");
    const auto print_row = [](const nlohmann::json& r) {
      char goal[16] = "-";
      if (r.contains("goal_ratio")) std::snprintf(goal, sizeof goal, "%.3f", r.at("goal_ratio").get<double>());
      std::fprintf(stderr, "  %-22s %6lld %6lld %7lld %5s %7.3f %7s %10.4f %10.4f\n", r.value("head", "").c_str(),
                   r.at("n").get<long long>(), r.at("hidden").get<long long>(), r.at("vocab").get<long long>(),
                   r.value("dtype", "").c_str(), r.at("ratio").get<double>(), goal, r.at("fused_ms").get<double>(),
                   r.at("gemm_ms").get<double>());
    };
    for (std::size_t i = 0; i < of_mode.size() && i < static_cast<std::size_t>(worst); ++i) print_row(*of_mode[i]);
    std::size_t with_goal = 0, misses = 0;
    for (const auto* r : of_mode) {
      with_goal += r->contains("meets_goal") ? 1 : 0;
      misses += r->value("meets_goal", true) ? 0 : 1;
    }
    std::fprintf(stderr, "%s points that miss their goal: %zu of %zu with one\n", mode, misses, with_goal);
    for (const auto* r : of_mode) {
      if (!r->value("meets_goal", true)) print_row(*r);
    }
  }
}

// The rows of `path` that timed their point (no "error"); none where there is no such file.
std::vector<nlohmann::json> timed_rows(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_object() && row.contains("ratio") && !row.contains("error")) rows.push_back(std::move(row));
  }
  return rows;
}

bool row_of_point(const nlohmann::json& row, const SweepPoint& p) {
  const nlohmann::json fields = point_fields(p);
  for (const auto& [field, value] : fields.items()) {
    if (!row.contains(field) || row.at(field) != value) return false;
  }
  return true;
}

// A forward point's launch on a Hopper GPU of `gpu`'s multiprocessors and L2 (the sm_90a tiles), as
// the split rules make it for a single-GPU forward-only op (fwd_plan_row), so that a plan's odd
// choices show without a GPU. (A fwd+bwd point's forward may keep chunks instead, which its op's
// budgets decide.) The H200 and H100 share the multiprocessors but not the L2 (60 and 50 MiB),
// which the split count weighs.
nlohmann::json hopper_forward_plan(const SweepPoint& p, const GpuShape& gpu) {
  const FwdTile tile = default_fwd_tile(p.c.dtype, "sm_90a", true);
  const std::int64_t valid = p.c.valid_vocab > 0 ? p.c.valid_vocab : p.c.vocab;
  const std::int64_t row_bytes = p.c.hidden * static_cast<std::int64_t>(dtype_size(p.c.dtype));
  const VocabSplit plan =
      choose_fwd_plan(p.c.n, row_bytes, valid, tile, hopper_other_fwd_tiles(p.c.dtype, "sm_90a", true), gpu);
  return fwd_plan_row(plan, p.c.n, row_bytes, gpu.sm_count);
}

// A fwd+bwd point's backward on an H200 (132 multiprocessors, the sm_90a tiles) for a single-GPU
// op of the point's keep budget: its vocabulary chunks, and each kernel's grid on the first chunk
// with its split along K (templates/common/stream_k.cuh): tiles, those computed whole, the blocks
// among which the others are split (0: none split) and, for the GEMMs, the blocks of a cluster
// (1: none; cluster_stream_k, with the clusters an H100 runs at once, the same chip's). dZ's is
// that of a recomputed chunk. `keep`: what a fresh op's forward keeps for it (keep.hpp): the keep
// budget in MiB and the chunks kept, before the combine's limit on sources. grad_hidden's
// `rows_as_n`: the rows of its tiles where it takes the rows as N (gemm_rows_as_n_rows, with 50 MiB
// of L2), 0 for the 128 x 256 tiles; its grid is then that tile's (plan_rows_as_n).
nlohmann::json h200_backward_plan(const SweepPoint& p) {
  constexpr int kSms = 132;
  LinearLogpConfig config;
  config.hidden = p.c.hidden;
  config.vocab_local = p.c.vocab;
  config.valid_vocab = p.c.valid_vocab;
  config.dtype = p.c.dtype;
  config.want_backward = true;
  config.keep_logits_bytes = p.c.keep_logits_bytes;
  const LinearLogpLayout layout = resolve_single_gpu_layout(config);
  const LinearLogpBwdKernels specs = linear_logp_bwd_kernels(layout, "sm_90a", true, 1);
  const BackwardChunks chunks = backward_chunks(backward_chunks_input(config, specs, kSms, true, p.c.n, true));
  const std::int64_t cols = chunks.chunk(0).cols;
  // As the launches plan them: a split last wave cut alike on every tile; the GEMM's plans split
  // whole on a multiple of its row tiles and in clusters, dZ's not.
  const kernels::StreamKClusters h100_clusters{{0, 132, 66, 39, 30, 22, 17, 15, 15}, 0};  // 2026-12-06
  auto grid = [&](std::int64_t rows, std::int64_t columns, std::int64_t k, const BwdTileShape& tile, bool gemm) {
    const BwdGridSplit split = backward_grid_split(rows, columns, k, tile, kSms, true, gemm, h100_clusters);
    const std::int64_t whole = split.plan.workers > 0 ? split.plan.whole_tiles : split.tiles;
    nlohmann::json row{{"tiles", split.tiles}, {"whole_tiles", whole}, {"split_workers", split.plan.workers}};
    if (gemm) row["cluster"] = std::max(split.plan.cluster, 1);
    return row;
  };
  const BwdTileShape dz = specs.hopper_dz_shape().value();
  const BwdTileShape gemm = specs.hopper_gemm_shape().value();
  constexpr std::int64_t kL2Bytes = std::int64_t{50} << 20;
  const int rows_as_n = gemm_rows_as_n_rows(p.c.n, p.c.hidden, cols, kSms, true, h100_clusters, kL2Bytes);
  nlohmann::json hidden = grid(p.c.n, p.c.hidden, cols, gemm, true);
  if (rows_as_n > 0) {
    const kernels::StreamKPlan plan =
        gemm_rows_as_n_plan(p.c.n, p.c.hidden, cols, rows_as_n, kSms, true, h100_clusters);
    hidden = {{"tiles", plan.tiles},
              {"whole_tiles", plan.workers > 0 ? plan.whole_tiles : plan.tiles},
              {"split_workers", plan.workers},
              {"cluster", std::max(plan.cluster, 1)}};
  }
  hidden["rows_as_n"] = rows_as_n;
  const BackwardBufferBudget budget = backward_buffer_budget(config, {}, chunks);
  const int kept = keepable_chunks(chunks, layout.valid_local, default_fwd_tile(p.c.dtype, "sm_90a", true).bn,
                                   kept_chunks_budget(chunks, p.c.n, budget.keep_room));
  const nlohmann::json keep{{"budget_mib", budget.keep_budget >> 20}, {"kept_chunks", kept}};
  return {{"chunks", chunks.chunks},
          {"keep", keep},
          {"chunk_cols", cols},
          {"dz", grid(p.c.n, cols, p.c.hidden, dz, false)},
          {"grad_weight", grid(cols, p.c.hidden, p.c.n, gemm, true)},
          {"grad_hidden", hidden}};
}

int list_points(const std::vector<SweepPoint>& points, const TimingOptions& timing) {
  double total = 0;
  for (const SweepPoint& p : points) {
    nlohmann::json row = point_fields(p);
    if (!p.c.backward) {
      row["h200_fwd_plan"] = hopper_forward_plan(p, GpuShape{132, 60ll << 20});
      row["h100_fwd_plan"] = hopper_forward_plan(p, GpuShape{132, 50ll << 20});
    }
    if (p.c.backward) row["h200_bwd_plan"] = h200_backward_plan(p);
    row["estimated_s"] = estimated_point_seconds(p, timing);
    total += row["estimated_s"].get<double>();
    std::printf("%s\n", row.dump().c_str());
  }
  // The rows first: stdout to a pipe is written in blocks, and the summary on stderr would
  // otherwise land inside the row a block ends in (where both go to one file, as ctest reads them).
  std::fflush(stdout);
  std::fprintf(stderr, "sweep: %zu points, about %.0f s of timing on an H200 (kernels compiled before, apart)\n",
               points.size(), total);
  return 0;
}

}  // namespace

int run_linear_logp_sweep(const SweepOptions& options, const TimingOptions& timing) {
  std::vector<SweepPoint> points = load_sweep_points(options.grid, options.list);
  // --resume: the points the file already has a timing of keep their rows and are not run again.
  std::vector<nlohmann::json> rows;
  if (options.resume) {
    if (options.out.empty()) throw std::runtime_error("--resume needs --out, the file of the rows so far");
    rows = timed_rows(options.out);
    std::erase_if(points, [&](const SweepPoint& p) {
      return std::any_of(rows.begin(), rows.end(), [&](const nlohmann::json& row) { return row_of_point(row, p); });
    });
    std::fprintf(stderr, "sweep: %zu points already timed in '%s', %zu to go\n", rows.size(), options.out.c_str(),
                 points.size());
  }
  if (options.dry_run) return list_points(points, timing);
  std::ofstream out;
  if (!options.out.empty()) {
    // Written afresh: a resumed sweep keeps the timed rows and drops failed or cut-off ones.
    out.open(options.out, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write sweep rows to '" + options.out + "'");
    for (const nlohmann::json& row : rows) out << row.dump() << '\n';
    out << std::flush;
  }
  const int jobs = options.compile_jobs > 0 ? options.compile_jobs : static_cast<int>(default_compile_jobs());
  if (!points.empty()) compile_grid_kernels(points, jobs);
  const double hbm_gbps = points.empty() ? 0.0 : measured_hbm_gbps();
  if (hbm_gbps > 0) std::fprintf(stderr, "sweep: device memory %.0f GB/s (a device-to-device copy)\n", hbm_gbps);
  int failures = 0;
  for (const SweepPoint& p : points) {
    nlohmann::json row;
    try {
      row = run_linear_logp_case(p.c, timing);
      row.update(point_fields(p));
      add_goal(row, p, hbm_gbps);
    } catch (const std::exception& e) {
      row = point_fields(p);
      row["error"] = e.what();
      ++failures;
      std::fprintf(stderr, "sweep: %s n=%lld %s %s failed: %s\n", p.head.c_str(), static_cast<long long>(p.c.n),
                   dtype_name(p.c.dtype), p.c.backward ? "fwd+bwd" : "fwd", e.what());
    }
    row["grid"] = options.list;
    // The same row on stdout as in --out, so that the output alone is the sweep's record.
    std::printf("%s\n", row.dump().c_str());
    std::fflush(stdout);
    if (out) out << row.dump() << '\n' << std::flush;
    rows.push_back(std::move(row));
  }
  print_worst(rows, options.worst);
  if (failures > 0) std::fprintf(stderr, "\nsweep: %d of %zu points failed (rows with \"error\")\n", failures, points.size());
  return failures > 0 ? 1 : 0;
}

}  // namespace shardjit::bench
