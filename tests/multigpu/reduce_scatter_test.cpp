// ReduceScatter on 2 GPUs, one process per GPU, against an fp64 reference computed in the test
// process from the same deterministic inputs: both paths, every dtype, even, uneven and empty
// blocks, both flagged protocols for small inputs, 1000 calls in a row with changing data, inputs
// large enough to move in stages, graph capture and replay, configs that differ between ranks,
// and a peer that never joins.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "collective_problem.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"

namespace shardjit {
namespace {

using namespace testing;

struct DenseCase {
  DType dtype = DType::kBF16;
  std::int64_t hidden = 0;
  std::vector<std::int64_t> rows;
  CollectivePath path = CollectivePath::kPeer;
  std::uint64_t seed = 1;

  std::int64_t total() const {
    std::int64_t t = 0;
    for (std::int64_t r : rows) t += r;
    return t;
  }
  std::string name() const {
    std::string blocks;
    for (std::int64_t r : rows) blocks += (blocks.empty() ? "" : "+") + std::to_string(r);
    return std::string(collective_path_name(path)) + " " + dtype_name(dtype) + " H" + std::to_string(hidden) + " rows " +
           blocks;
  }
};

ReduceScatterConfig config_of(const DenseCase& c) {
  ReduceScatterConfig config;
  config.dtype = c.dtype;
  config.hidden = c.hidden;
  config.rows_per_rank = c.rows;
  config.path = c.path;
  return config;
}

// Whether each rank allows the line protocol (RuntimeOptions::peer_lines): small inputs move in
// flagged lines only if every rank does (and the links carry whole lines), else in flagged words.
using LinesAllowed = std::array<bool, 2>;
constexpr LinesAllowed kLinesWhereLinksAllow = {true, true};

RuntimeOptions options_of(const LinesAllowed& lines, int rank) {
  RuntimeOptions options;
  options.peer_lines = lines[static_cast<std::size_t>(rank)];
  return options;
}

// Runs each case once on this rank; reports "out<i>" (its output bytes), "path<i>" and "device<i>".
void run_cases(RankContext& ctx, const std::vector<DenseCase>& cases, const LinesAllowed& lines) {
  Runtime runtime(options_of(lines, ctx.rank));
  Communicator comm = rank_communicator(runtime, ctx);
  const DeviceContext& device = runtime.impl().device(ctx.rank);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const DenseCase& c = cases[i];
    ReduceScatter op(runtime, comm, config_of(c));
    const std::int64_t mine = c.rows[static_cast<std::size_t>(ctx.rank)];
    DeviceArray input = DeviceArray::from(rank_input(c.seed, ctx.rank, 0, c.total() * c.hidden, c.dtype), device);
    DeviceArray output(std::max<std::size_t>(1, static_cast<std::size_t>(mine * c.hidden) * dtype_size(c.dtype)), device);
    output.fill_bytes(0xff);
    op.run({input.data(), c.dtype, c.total(), c.hidden, 0}, {output.data(), c.dtype, mine, c.hidden, 0}, nullptr);
    op.check(nullptr);
    ctx.report.put("out" + std::to_string(i),
                   output.to_vector<std::uint8_t>(static_cast<std::size_t>(mine * c.hidden) * dtype_size(c.dtype)));
    ctx.report.put_text("path" + std::to_string(i), collective_path_name(op.path()));
    ctx.report.put_text("device" + std::to_string(i), std::to_string(op.device()));
  }
}

void expect_cases_match_reference(const std::vector<DenseCase>& cases,
                                  const LinesAllowed& lines = kLinesWhereLinksAllow) {
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) { run_cases(ctx, cases, lines); });
  expect_all_ok(outcomes);
  if (::testing::Test::HasFailure()) return;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const DenseCase& c = cases[i];
    for (const RankOutcome& o : outcomes) {
      EXPECT_EQ(o.report.text("path" + std::to_string(i)), collective_path_name(c.path)) << c.name();
      EXPECT_EQ(o.report.text("device" + std::to_string(i)), std::to_string(o.rank)) << c.name();  // rank r: GPU r
      const std::vector<double> ref = reduce_scatter_reference(c.seed, 0, 2, c.dtype, c.hidden, c.rows, o.rank);
      expect_close(o.report.get<std::uint8_t>("out" + std::to_string(i)), ref, c.dtype, 2,
                   c.name() + " rank " + std::to_string(o.rank));
    }
  }
}

TEST(ReduceScatter, EvenBlocksEveryDtypeBothPaths) {
  SHARDJIT_REQUIRE_GPUS(2);
  std::vector<DenseCase> cases;
  for (CollectivePath path : {CollectivePath::kPeer, CollectivePath::kNccl}) {
    for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
      cases.push_back({dtype, 1000, {333, 333}, path, cases.size() + 11});
    }
  }
  expect_cases_match_reference(cases);
}

// Inputs up to 4 MiB whose blocks all have rows take a flagged protocol (lines or words), the
// rest the staged one. The flagged blocks here end in part-filled 31-word lines, two of them inside
// the words of the lane that also holds the flag.
std::vector<DenseCase> uneven_cases() {
  return {
      {DType::kBF16, 4096, {100, 37}, CollectivePath::kPeer, 21},
      {DType::kBF16, 4096, {100, 37}, CollectivePath::kNccl, 22},
      {DType::kFP16, 256, {0, 50}, CollectivePath::kPeer, 23},
      {DType::kFP32, 256, {50, 0}, CollectivePath::kNccl, 24},
      {DType::kBF16, 1002, {7, 9}, CollectivePath::kPeer, 25},   // 2004-byte rows: 4-byte chunks
      {DType::kFP32, 130, {1, 1}, CollectivePath::kPeer, 26},    // 520-byte rows: 8-byte chunks
      {DType::kFP32, 61, {1, 2}, CollectivePath::kPeer, 28},     // 61 and 122 words: 30 and 29 in the last line
      {DType::kBF16, 4096, {700, 640}, CollectivePath::kPeer, 27},  // 11 MB: past the flagged protocols
  };
}

TEST(ReduceScatter, UnevenAndEmptyBlocksAndNarrowRows) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_cases_match_reference(uneven_cases());
}

// One rank turning the lines off makes both ranks take the word protocol (a mismatch would hang
// or garble every small call).
TEST(ReduceScatter, WordProtocolWhenOneRankTurnsTheLinesOff) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_cases_match_reference(uneven_cases(), {true, false});
}

// 1000 calls back to back, no host synchronization between them, each on new inputs into its own
// output. A stale value from an earlier call (the receive buffers alternate by epoch), or a line
// whose flag arrived before its data, would show as a mismatch in that call.
void expect_thousand_calls_match(const LinesAllowed& lines) {
  constexpr int kCalls = 1000;
  const DenseCase c{DType::kBF16, 256, {24, 40}, CollectivePath::kPeer, 31};
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime(options_of(lines, ctx.rank));
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    ReduceScatter op(runtime, comm, config_of(c));
    const auto in_bytes = static_cast<std::size_t>(c.total() * c.hidden) * 2;
    const std::int64_t mine = c.rows[static_cast<std::size_t>(ctx.rank)];
    const auto out_bytes = static_cast<std::size_t>(mine * c.hidden) * 2;
    std::vector<std::uint8_t> all_inputs;
    for (int call = 0; call < kCalls; ++call) {
      const auto bytes = rank_input(c.seed, ctx.rank, call, c.total() * c.hidden, c.dtype);
      all_inputs.insert(all_inputs.end(), bytes.begin(), bytes.end());
    }
    DeviceArray inputs = DeviceArray::from(all_inputs, device);
    DeviceArray outputs(out_bytes * kCalls, device);
    outputs.fill_bytes(0xff);
    for (int call = 0; call < kCalls; ++call) {
      auto* in = static_cast<char*>(inputs.data()) + in_bytes * static_cast<std::size_t>(call);
      const MatrixView out{static_cast<char*>(outputs.data()) + out_bytes * static_cast<std::size_t>(call), c.dtype,
                           mine, c.hidden, 0};
      op.run({in, c.dtype, c.total(), c.hidden, 0}, out, nullptr);
    }
    op.check(nullptr);
    ctx.report.put("outputs", outputs.to_vector<std::uint8_t>(out_bytes * kCalls));
  });
  expect_all_ok(outcomes);
  if (::testing::Test::HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    const auto all = o.report.get<std::uint8_t>("outputs");
    const std::size_t per = all.size() / kCalls;
    int bad_calls = 0, first_bad = -1;
    for (int call = 0; call < kCalls; ++call) {
      const std::vector<std::uint8_t> got(all.begin() + static_cast<long>(per * call),
                                          all.begin() + static_cast<long>(per * (call + 1)));
      const CloseReport r = compare_to_reference(
          got, reduce_scatter_reference(c.seed, call, 2, c.dtype, c.hidden, c.rows, o.rank), c.dtype, 2);
      if (r.bad + r.nan_mismatches > 0 && bad_calls++ == 0) first_bad = call;
    }
    EXPECT_EQ(bad_calls, 0) << "rank " << o.rank << ": first wrong call " << first_bad;
  }
}

TEST(ReduceScatter, ThousandCallsWithChangingData) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_thousand_calls_match(kLinesWhereLinksAllow);
}

TEST(ReduceScatter, ThousandCallsWithChangingDataInFlaggedWords) {
  SHARDJIT_REQUIRE_GPUS(2);
  expect_thousand_calls_match({false, false});
}

// Inputs of 64 MiB and more move in stages (sending and summing overlap); four calls with new
// data, so both receive halves are used twice.
TEST(ReduceScatter, StagedLargeInputsOverSeveralCalls) {
  SHARDJIT_REQUIRE_GPUS(2);
  constexpr int kCalls = 4;
  const DenseCase c{DType::kBF16, 4096, {4200, 4100}, CollectivePath::kPeer, 35};
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    ReduceScatter op(runtime, comm, config_of(c));
    const std::int64_t mine = c.rows[static_cast<std::size_t>(ctx.rank)];
    DeviceArray input(static_cast<std::size_t>(c.total() * c.hidden) * 2, device);
    DeviceArray output(static_cast<std::size_t>(mine * c.hidden) * 2, device);
    for (int call = 0; call < kCalls; ++call) {
      input.upload(rank_input(c.seed, ctx.rank, call, c.total() * c.hidden, c.dtype).data(), input.bytes());
      output.fill_bytes(0xff);
      op.run({input.data(), c.dtype, c.total(), c.hidden, 0}, {output.data(), c.dtype, mine, c.hidden, 0}, nullptr);
      op.check(nullptr);
      ctx.report.put("call" + std::to_string(call), output.to_vector<std::uint8_t>(output.bytes()));
    }
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    for (int call = 0; call < kCalls; ++call) {
      expect_close(o.report.get<std::uint8_t>("call" + std::to_string(call)),
                   reduce_scatter_reference(c.seed, call, 2, c.dtype, c.hidden, c.rows, o.rank), c.dtype, 2,
                   "staged call " + std::to_string(call) + " rank " + std::to_string(o.rank));
    }
  }
}

// A captured call replayed after the input was overwritten gives the new sum each time.
TEST(ReduceScatter, GraphCaptureAndReplay) {
  SHARDJIT_REQUIRE_GPUS(2);
  constexpr int kReplays = 5;
  const DenseCase c{DType::kFP16, 512, {64, 64}, CollectivePath::kPeer, 41};
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    ReduceScatter op(runtime, comm, config_of(c));  // built (and registered) before any capture
    const std::int64_t mine = c.rows[static_cast<std::size_t>(ctx.rank)];
    DeviceArray input(static_cast<std::size_t>(c.total() * c.hidden) * 2, device);
    DeviceArray output(static_cast<std::size_t>(mine * c.hidden) * 2, device);
    ScopedContext scope(device);
    OwnedStream stream(device);
    CUgraph graph = nullptr;
    CUgraphExec exec = nullptr;
    SHARDJIT_CU(cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    op.run({input.data(), c.dtype, c.total(), c.hidden, 0}, {output.data(), c.dtype, mine, c.hidden, 0}, stream.get());
    SHARDJIT_CU(cuStreamEndCapture(stream.get(), &graph));
    SHARDJIT_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    for (int replay = 0; replay < kReplays; ++replay) {
      input.upload(rank_input(c.seed, ctx.rank, replay, c.total() * c.hidden, c.dtype).data(), input.bytes());
      output.fill_bytes(0xff);
      SHARDJIT_CU(cuGraphLaunch(exec, stream.get()));
      op.check(stream.get());
      ctx.report.put("replay" + std::to_string(replay), output.to_vector<std::uint8_t>(output.bytes()));
    }
    SHARDJIT_CU(cuGraphExecDestroy(exec));
    SHARDJIT_CU(cuGraphDestroy(graph));
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  for (const RankOutcome& o : outcomes) {
    for (int replay = 0; replay < kReplays; ++replay) {
      expect_close(o.report.get<std::uint8_t>("replay" + std::to_string(replay)),
                   reduce_scatter_reference(c.seed, replay, 2, c.dtype, c.hidden, c.rows, o.rank), c.dtype, 2,
                   "graph replay " + std::to_string(replay) + " rank " + std::to_string(o.rank));
    }
  }
}

TEST(ReduceScatter, ConfigsThatDifferAreRejectedOnEveryRankAlike) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    ReduceScatterConfig config;
    config.hidden = 256;
    config.rows_per_rank = ctx.rank == 0 ? std::vector<std::int64_t>{8, 8} : std::vector<std::int64_t>{8, 9};
    ReduceScatter op(runtime, comm, config);
  });
  ASSERT_EQ(outcomes.size(), 2u);
  for (const RankOutcome& o : outcomes) {
    EXPECT_TRUE(o.finished) << describe(outcomes);
    EXPECT_EQ(o.error_code, static_cast<int>(ErrorCode::kInvalidArgument)) << o.error;
    EXPECT_NE(o.error.find("rows_per_rank=[8,9]"), std::string::npos) << o.error;
  }
  EXPECT_EQ(outcomes[0].error, outcomes[1].error);
}

TEST(ReduceScatter, BadConfigOnOneRankFailsEveryRank) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    ReduceScatterConfig config;
    config.hidden = ctx.rank == 1 ? 255 : 256;  // 510-byte bf16 rows are not whole 4-byte chunks
    config.rows_per_rank = {8, 8};
    ReduceScatter op(runtime, comm, config);
  });
  for (const RankOutcome& o : outcomes) {
    EXPECT_EQ(o.error_code, static_cast<int>(ErrorCode::kInvalidArgument)) << describe(outcomes);
    EXPECT_NE(o.error.find("rank 1: ReduceScatter: a row of 510 bytes"), std::string::npos) << o.error;
  }
}

TEST(ReduceScatter, BadViewsAreClearErrors) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    Runtime runtime;
    Communicator comm = rank_communicator(runtime, ctx);
    const DeviceContext& device = runtime.impl().device(ctx.rank);
    ReduceScatterConfig config;
    config.hidden = 256;
    config.rows_per_rank = {8, 8};
    ReduceScatter op(runtime, comm, config);
    DeviceArray a(16 * 256 * 2 + 16, device);
    std::string messages;
    const auto attempt = [&](const MatrixView& in, const MatrixView& out) {
      try {
        op.run(in, out, nullptr);
        messages += "no error|";
      } catch (const Error& e) {
        messages += std::string(e.what()) + "|";
      }
    };
    attempt({a.data(), DType::kBF16, 15, 256, 0}, {a.data(), DType::kBF16, 8, 256, 0});
    attempt({a.data(), DType::kFP16, 16, 256, 0}, {a.data(), DType::kBF16, 8, 256, 0});
    attempt({a.data(), DType::kBF16, 16, 256, 0}, {static_cast<char*>(a.data()) + 2, DType::kBF16, 8, 256, 0});
    attempt({a.data(), DType::kBF16, 16, 256, 300}, {a.data(), DType::kBF16, 8, 256, 0});
    ctx.report.put_text("messages", messages);
  });
  expect_all_ok(outcomes);
  if (HasFailure()) return;
  const std::string m = outcomes[0].report.text("messages");
  EXPECT_NE(m.find("ReduceScatter: input is [15, 256]; expected [16, 256]"), std::string::npos) << m;
  EXPECT_NE(m.find("input has dtype fp16; expected bf16"), std::string::npos) << m;
  EXPECT_NE(m.find("output is not 16-byte aligned"), std::string::npos) << m;
  EXPECT_NE(m.find("row_stride 300"), std::string::npos) << m;
  EXPECT_EQ(m.find("no error"), std::string::npos) << m;
}

// Rank 1 builds the op and exits; rank 0's call gives up after the timeout: NaN output and
// Error(kCommError) from check(), not a hang.
TEST(ReduceScatter, PeerThatNeverJoinsTimesOut) {
  SHARDJIT_REQUIRE_GPUS(2);
  const auto outcomes = run_ranks(2, [&](RankContext& ctx) {
    reduce_scatter_without_its_peer(ctx, CollectivePath::kPeer, 5,
                                    [&](Communicator&, ReduceScatter& op, const DeviceContext&, DeviceArray& output) {
      const auto began = std::chrono::steady_clock::now();
      ctx.report.put_text("check", check_outcome(op));
      ctx.report.put_text("seconds", std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count()));
      const auto out = to_doubles(output.to_vector<std::uint8_t>(8 * 256 * 2), DType::kBF16);
      ctx.report.put_text("nan_output", std::isnan(out[0]) && std::isnan(out.back()) ? "yes" : "no");
    });
  }, std::chrono::seconds(60));
  ASSERT_EQ(outcomes.size(), 2u);
  const RankOutcome& r0 = outcomes[0];
  ASSERT_TRUE(r0.finished && r0.error.empty()) << describe(outcomes);
  const std::string check = r0.report.text("check");
  EXPECT_TRUE(is_comm_error(check)) << check;
  EXPECT_NE(check.find("gave up waiting for a peer"), std::string::npos) << check;
  EXPECT_EQ(r0.report.text("nan_output"), "yes");
  EXPECT_LT(std::stod(r0.report.text("seconds")), 30.0);
}

}  // namespace
}  // namespace shardjit
