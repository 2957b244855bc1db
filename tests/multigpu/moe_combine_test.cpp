// MoeCombine on 2 GPUs, one process per GPU, against an fp64 reference computed in the test
// process: random routing with tokens routed nowhere, gate weights, TP partial sums (every token
// from every rank), every dtype, both paths, zero copy, and positions out of range.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collective_problem.hpp"
#include "runtime/driver/cuda_driver.hpp"

namespace shardjit {
namespace {

using namespace testing;

constexpr int kWorld = 2;

struct MoeCase {
  DType dtype = DType::kBF16;
  std::int64_t hidden = 0;
  bool gates = false;
  CollectivePath path = CollectivePath::kPeer;
  bool tp_partials = false;  // every token takes a row from every rank
  bool zero_copy = false;
  std::uint64_t seed = 1;
  std::int64_t capacity = 96;

  std::string name() const {
    return std::string(collective_path_name(path)) + " " + dtype_name(dtype) + " H" + std::to_string(hidden) +
           (gates ? " gates" : "") + (tp_partials ? " tp-partials" : "") + (zero_copy ? " zero-copy" : "");
  }
  // Rows rank s holds this call, and tokens rank r owns (different on each rank).
  std::int64_t source_rows(int s) const { return s == 0 ? capacity : capacity - 17; }
  std::int64_t tokens(int r) const { return r == 0 ? 300 : 211; }
};

// Positions [tokens, world] for destination rank r: a random row of each source, -1 for about a
// third of the pairs (without TP partials), every fifth token routed nowhere.
std::vector<std::int32_t> positions_for(const MoeCase& c, int r) {
  std::vector<std::int32_t> pos(static_cast<std::size_t>(c.tokens(r) * kWorld));
  for (std::int64_t i = 0; i < c.tokens(r); ++i) {
    for (int s = 0; s < kWorld; ++s) {
      const std::uint64_t h = mix(c.seed * 977 + static_cast<std::uint64_t>(r * 100003 + i * kWorld + s));
      std::int32_t p = static_cast<std::int32_t>(h % static_cast<std::uint64_t>(c.source_rows(s)));
      if (!c.tp_partials && ((h >> 40) % 3 == 0 || i % 5 == 0)) p = -1;
      pos[static_cast<std::size_t>(i * kWorld + s)] = p;
    }
  }
  return pos;
}

std::vector<float> gates_for(const MoeCase& c, int r) {
  std::vector<float> g(static_cast<std::size_t>(c.tokens(r) * kWorld));
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i] = 0.1f + 0.9f * static_cast<float>(mix(c.seed * 31 + static_cast<std::uint64_t>(r) * 1000003 + i) >> 40) / 16777216.0f;
  }
  return g;
}

std::vector<double> moe_reference(const MoeCase& c, int r, const std::vector<std::int32_t>& pos) {
  std::vector<std::vector<double>> rows;
  for (int s = 0; s < kWorld; ++s) rows.push_back(to_doubles(rank_input(c.seed, s, 0, c.source_rows(s) * c.hidden, c.dtype), c.dtype));
  const std::vector<float> gates = gates_for(c, r);
  std::vector<double> out(static_cast<std::size_t>(c.tokens(r) * c.hidden), 0.0);
  for (std::int64_t i = 0; i < c.tokens(r); ++i) {
    for (int s = 0; s < kWorld; ++s) {
      const std::int32_t p = pos[static_cast<std::size_t>(i * kWorld + s)];
      if (p < 0) continue;
      const double g = c.gates ? gates[static_cast<std::size_t>(i * kWorld + s)] : 1.0;
      for (std::int64_t h = 0; h < c.hidden; ++h) {
        out[static_cast<std::size_t>(i * c.hidden + h)] += g * rows[static_cast<std::size_t>(s)][static_cast<std::size_t>(p * c.hidden + h)];
      }
    }
  }
  return out;
}

MoeCombineConfig config_of(const MoeCase& c) {
  MoeCombineConfig config;
  config.dtype = c.dtype;
  config.hidden = c.hidden;
  config.capacity = c.capacity;
  config.gates = c.gates;
  config.path = c.path;
  return config;
}

// One call of case `c` on this rank, with `positions`; reports its output and bad-position record.
void run_case(Runtime& runtime, Communicator& comm, const DeviceContext& device, const MoeCase& c,
              const std::vector<std::int32_t>& positions, RankReport& report, const std::string& key) {
  const int r = comm.rank();
  MoeCombine op(runtime, comm, config_of(c));
  const std::int64_t rows = c.source_rows(r);
  const auto row_bytes = static_cast<std::size_t>(c.hidden) * dtype_size(c.dtype);
  DeviceArray source = DeviceArray::from(rank_input(c.seed, r, 0, rows * c.hidden, c.dtype), device);
  DeviceArray pos = DeviceArray::from(positions, device);
  DeviceArray gates = DeviceArray::from(gates_for(c, r), device);
  DeviceArray output(static_cast<std::size_t>(c.tokens(r)) * row_bytes, device);
  output.fill_bytes(0xff);
  MoeCombineCall call;
  call.rows = {source.data(), c.dtype, rows, c.hidden, 0};
  if (c.zero_copy) {
    const MatrixView own = op.rows_buffer();
    ScopedContext scope(device);
    SHARDJIT_CU(cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(own.data), reinterpret_cast<CUdeviceptr>(source.data()),
                                  static_cast<std::size_t>(rows) * row_bytes, nullptr));
    call.rows.data = nullptr;
  }
  call.positions = {pos.data(), DType::kInt32, c.tokens(r), kWorld, 0};
  if (c.gates) call.gates = {gates.data(), DType::kFP32, c.tokens(r), kWorld, 0};
  call.output = {output.data(), c.dtype, c.tokens(r), c.hidden, 0};
  op.run(call, nullptr);
  const BadPositionReport bad = op.check(nullptr);
  report.put(key, output.to_vector<std::uint8_t>(output.bytes()));
  report.put_text(key + "_path", collective_path_name(op.path()));
  report.put_text(key + "_device", std::to_string(op.device()));
  report.put_text(key + "_bad", std::to_string(bad.bad_positions) + " " + std::to_string(bad.first_bad_position));
}

void expect_cases_match_reference(const std::vector<MoeCase>& cases) {
  const auto outcomes = run_ranks(kWorld, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      run_case(runtime, comm, device, cases[i], positions_for(cases[i], ctx.rank), ctx.report, "out" + std::to_string(i));
    }
  });
  expect_all_ok(outcomes);
  if (::testing::Test::HasFailure()) return;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const MoeCase& c = cases[i];
    const std::string key = "out" + std::to_string(i);
    for (const RankOutcome& o : outcomes) {
      EXPECT_EQ(o.report.text(key + "_path"), collective_path_name(c.path)) << c.name();
      EXPECT_EQ(o.report.text(key + "_device"), std::to_string(o.rank)) << c.name();  // rank r: GPU r
      EXPECT_EQ(o.report.text(key + "_bad"), "0 0") << c.name();
      expect_close(o.report.get<std::uint8_t>(key), moe_reference(c, o.rank, positions_for(c, o.rank)), c.dtype, kWorld,
                   c.name() + " rank " + std::to_string(o.rank));
    }
  }
}

TEST(MoeCombine, RandomRoutingEveryDtypeBothPaths) {
  SHARDJIT_REQUIRE_GPUS(2);
  std::vector<MoeCase> cases;
  for (CollectivePath path : {CollectivePath::kPeer, CollectivePath::kNccl}) {
    cases.push_back({DType::kBF16, 4096, true, path, false, false, 51});
    cases.push_back({DType::kFP16, 1000, false, path, false, false, 52});
    cases.push_back({DType::kFP32, 520, true, path, false, false, 53});
  }
  expect_cases_match_reference(cases);
}

TEST(MoeCombine, TpPartialsZeroCopyAndNarrowRows) {
  SHARDJIT_REQUIRE_GPUS(2);
  const std::vector<MoeCase> cases = {
      {DType::kBF16, 2048, false, CollectivePath::kPeer, true, false, 61},
      {DType::kBF16, 2048, true, CollectivePath::kPeer, false, true, 62},
      {DType::kFP16, 1000, true, CollectivePath::kNccl, false, true, 63},
      {DType::kBF16, 1002, true, CollectivePath::kPeer, false, false, 64},  // 4-byte chunks
  };
  expect_cases_match_reference(cases);
}

TEST(MoeCombine, PositionsOutOfRangePoisonTheirRowsAndAreReported) {
  SHARDJIT_REQUIRE_GPUS(2);
  const MoeCase c{DType::kBF16, 512, false, CollectivePath::kPeer, false, false, 71};
  const auto bad_positions = [&](int r) {
    std::vector<std::int32_t> pos = positions_for(c, r);
    pos[3 * kWorld + 1] = static_cast<std::int32_t>(c.capacity);  // one past the buffer
    pos[8 * kWorld + 0] = -2;
    return pos;
  };
  const auto outcomes = run_ranks(kWorld, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    run_case(runtime, comm, runtime.impl().device(ctx.rank), c, bad_positions(ctx.rank), ctx.report, "out");
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    const std::string bad = o.report.text("out_bad");
    EXPECT_TRUE(bad == "2 96" || bad == "2 -2") << bad;
    std::vector<double> ref = moe_reference(c, o.rank, positions_for(c, o.rank));
    for (std::int64_t token : {3, 8}) {
      for (std::int64_t h = 0; h < c.hidden; ++h) ref[static_cast<std::size_t>(token * c.hidden + h)] = std::nan("");
    }
    expect_close(o.report.get<std::uint8_t>("out"), ref, c.dtype, kWorld, "bad positions rank " + std::to_string(o.rank));
  }
}

}  // namespace
}  // namespace shardjit
