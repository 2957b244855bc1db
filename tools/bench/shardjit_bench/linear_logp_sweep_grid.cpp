// The sweep's grid file: heads, and blocks that cross some of them with row counts, dtypes and
// modes (tools/bench/sweep_grid.json documents the format).
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include <nlohmann/json.hpp>

#include "linear_logp_sweep.hpp"

namespace shardjit::bench {
namespace {

struct Head {
  std::int64_t hidden = 0, vocab = 0;
  int tp = 1;
  std::int64_t valid_vocab = 0;  // 0: every row a token
};

[[noreturn]] void bad_grid(const std::string& path, const std::string& what) {
  throw std::runtime_error("sweep grid '" + path + "': " + what);
}

// A misspelled field would otherwise be read as absent, and the grid run without it.
void expect_fields(const nlohmann::json& object, const std::set<std::string>& known, const std::string& what,
                   const std::string& path) {
  if (!object.is_object()) bad_grid(path, what + ": expected an object");
  for (const auto& [field, value] : object.items()) {
    if (known.contains(field)) continue;
    std::string names;
    for (const std::string& name : known) names += (names.empty() ? "" : ", ") + name;
    bad_grid(path, what + ": unknown field \"" + field + "\" (expected: " + names + ")");
  }
}

std::map<std::string, Head> read_heads(const nlohmann::json& grid, const std::string& path) {
  std::map<std::string, Head> heads;
  if (!grid.contains("heads") || !grid["heads"].is_array()) bad_grid(path, "expected an array \"heads\"");
  for (const auto& h : grid["heads"]) {
    expect_fields(h, {"name", "hidden", "vocab", "tp", "valid_vocab"}, "a head", path);
    const std::string name = h.value("name", "");
    Head head{h.value("hidden", std::int64_t{0}), h.value("vocab", std::int64_t{0}), h.value("tp", 1),
              h.value("valid_vocab", std::int64_t{0})};
    if (name.empty()) bad_grid(path, "a head without a \"name\"");
    if (head.hidden <= 0 || head.hidden % 8 != 0) bad_grid(path, name + ": \"hidden\" must be a positive multiple of 8");
    if (head.vocab <= 0 || head.tp < 1 || head.tp > head.vocab) {
      bad_grid(path, name + ": expected \"vocab\" >= 1 and 1 <= \"tp\" <= vocab");
    }
    // A TP point times the first shard, which holds no padding rows: padding is timed whole.
    if (head.valid_vocab < 0 || head.valid_vocab > head.vocab || (head.valid_vocab > 0 && head.tp != 1)) {
      bad_grid(path, name + ": expected 1 <= \"valid_vocab\" <= vocab, on a head of tp 1");
    }
    if (!heads.emplace(name, head).second) bad_grid(path, "head '" + name + "' is listed twice");
  }
  return heads;
}

std::vector<std::string> strings_of(const nlohmann::json& block, const char* key, const std::string& path) {
  if (!block.contains(key) || !block[key].is_array() || block[key].empty()) {
    bad_grid(path, std::string("a block needs a non-empty array \"") + key + "\"");
  }
  return block[key].get<std::vector<std::string>>();
}

// The head names a block names; "*" is every head.
std::vector<std::string> block_heads(const nlohmann::json& block, const std::map<std::string, Head>& heads,
                                     const std::string& path) {
  std::vector<std::string> names = strings_of(block, "heads", path);
  if (names == std::vector<std::string>{"*"}) {
    names.clear();
    for (const auto& [name, head] : heads) names.push_back(name);
  }
  for (const std::string& name : names) {
    if (!heads.contains(name)) bad_grid(path, "a block names head '" + name + "', which \"heads\" does not list");
  }
  return names;
}

void add_block(const nlohmann::json& block, const std::map<std::string, Head>& heads, const std::string& path,
               std::vector<SweepPoint>& points) {
  expect_fields(block, {"heads", "n", "dtypes", "modes"}, "a block", path);
  if (!block.contains("n") || !block["n"].is_array() || block["n"].empty()) {
    bad_grid(path, "a block needs a non-empty array \"n\"");
  }
  const auto rows = block["n"].get<std::vector<std::int64_t>>();
  if (std::any_of(rows.begin(), rows.end(), [](std::int64_t n) { return n < 1; })) bad_grid(path, "\"n\" must be >= 1");
  for (const std::string& mode : strings_of(block, "modes", path)) {
    if (mode != "fwd" && mode != "fwd+bwd") bad_grid(path, "mode '" + mode + "': expected \"fwd\" or \"fwd+bwd\"");
  }
  for (const std::string& dtype_text : strings_of(block, "dtypes", path)) {
    const auto dtype = parse_dtype(dtype_text);
    if (!dtype || *dtype == DType::kInt32 || *dtype == DType::kInt64) {
      bad_grid(path, "dtype '" + dtype_text + "': expected bf16, fp16 or fp32");
    }
    for (const std::string& name : block_heads(block, heads, path)) {
      const Head& head = heads.at(name);
      for (const std::string& mode : strings_of(block, "modes", path)) {
        for (std::int64_t n : rows) {
          SweepPoint p{name, head.tp, {}};
          p.c = {name, n, head.hidden, (head.vocab + head.tp - 1) / head.tp, *dtype, false, mode == "fwd+bwd"};
          p.c.valid_vocab = head.valid_vocab;
          points.push_back(p);
        }
      }
    }
  }
}

}  // namespace

std::vector<SweepPoint> load_sweep_points(const std::string& grid_path, const std::string& list) {
  std::ifstream in(grid_path);
  if (!in) throw std::runtime_error("cannot open sweep grid '" + grid_path + "'");
  nlohmann::json grid;
  try {
    grid = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad_grid(grid_path, std::string("not valid JSON: ") + e.what());
  }
  const std::map<std::string, Head> heads = read_heads(grid, grid_path);
  if (!grid.contains(list) || !grid[list].is_array() || list == "heads" || list == "doc") {
    std::string lists;
    for (const auto& [name, value] : grid.items()) {
      if (value.is_array() && name != "heads" && name != "doc") lists += (lists.empty() ? "" : ", ") + name;
    }
    bad_grid(grid_path, "no list of blocks \"" + list + "\" (it has: " + lists + ")");
  }
  std::vector<SweepPoint> points;
  try {
    for (const auto& block : grid[list]) add_block(block, heads, grid_path, points);
  } catch (const nlohmann::json::exception& e) {
    bad_grid(grid_path, std::string("a block's field has the wrong type: ") + e.what());
  }
  // One op (and its kernels) per hidden, vocabulary and its padding, and dtype: their points next
  // to each other.
  const auto key = [](const SweepPoint& p) {
    return std::make_tuple(p.c.hidden, p.c.vocab, p.c.valid_vocab, static_cast<int>(p.c.dtype), p.c.backward, p.c.n,
                           p.head);
  };
  std::sort(points.begin(), points.end(), [&](const SweepPoint& a, const SweepPoint& b) { return key(a) < key(b); });
  points.erase(std::unique(points.begin(), points.end(), [&](const SweepPoint& a, const SweepPoint& b) { return key(a) == key(b); }),
               points.end());
  return points;
}

double estimated_point_seconds(const SweepPoint& point, const TimingOptions& timing) {
  // H200-class roofline: cuBLAS at about 650 TFLOP/s dense 16-bit, HBM at about 4 TB/s.
  const LinearLogpCase& c = point.c;
  const double element = static_cast<double>(dtype_size(c.dtype));
  const double flops = 2.0 * static_cast<double>(c.n) * static_cast<double>(c.vocab) * static_cast<double>(c.hidden);
  const double bytes = element * static_cast<double>(c.n * c.hidden + c.vocab * c.hidden + c.n * c.vocab);
  const double gemm_s = std::max(flops / 6.5e14, bytes / 4.0e12) + 10e-6;
  const double op_over_gemm = c.backward ? 4.5 : 1.3;
  const double rounds = static_cast<double>(timing.warmup + timing.iterations);
  // Setting a point up: random inputs made on the host and copied (about 1 GB/s of W all told),
  // the op's build from the disk cache, cuBLAS's first call.
  const double setup_s = 0.3 + element * static_cast<double>(c.vocab * c.hidden) / 1.0e9;
  return rounds * gemm_s * (1.0 + op_over_gemm) + setup_s;
}

}  // namespace shardjit::bench
