// ReduceScatter and MoeCombine with a communicator of one rank, on one GPU (the NCCL path): the
// combine kernel's routing, gate weights, tokens routed nowhere and positions out of range, and
// the reduce-scatter of one rank, which is a copy; against a CPU reference. The multigpu tier
// runs both ops on two GPUs; this tier runs them where there is one. Also: the communicator's
// watchdog, polling a queued collective, leaves another thread's global-mode graph capture
// intact, and check() during a capture of its stream is refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/stream.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"
#include "support/reference.hpp"

namespace shardjit {
namespace {

using testing::DeviceArray;

class OneRankCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

Communicator one_rank(Runtime& runtime) {
  return Communicator::create(runtime, /*device=*/0, /*rank=*/0, /*size=*/1, Communicator::new_unique_id());
}

TEST_F(OneRankCollectives, MoeCombineRoutesGatesAndReportsBadPositions) {
  constexpr std::int64_t kHidden = 136, kCapacity = 50, kRows = 40, kTokens = 70;
  Runtime runtime;
  Communicator comm = one_rank(runtime);
  MoeCombineConfig config;
  config.hidden = kHidden;
  config.capacity = kCapacity;
  config.gates = true;
  MoeCombine op(runtime, comm, config);
  EXPECT_EQ(op.path(), CollectivePath::kNccl);

  std::vector<std::uint8_t> row_bytes, gate_bytes;
  const std::vector<float> rows = testing::random_values(21, kRows * kHidden, 1.0f, DType::kBF16, row_bytes);
  const std::vector<float> gates = testing::random_values(22, kTokens, 1.0f, DType::kFP32, gate_bytes);
  // Token t takes row (7 t) % kRows; every fifth token none (-1); token 13 names a row past the
  // capacity, token 17 one past this call's rows: both are bad positions.
  std::vector<std::int32_t> positions(kTokens);
  for (std::int64_t t = 0; t < kTokens; ++t) {
    positions[t] = t % 5 == 0 ? -1 : static_cast<std::int32_t>((7 * t) % kRows);
  }
  positions[13] = kCapacity;
  positions[17] = kRows;

  DeviceArray rows_device = DeviceArray::from(row_bytes);
  DeviceArray gates_device = DeviceArray::from(gate_bytes);
  DeviceArray positions_device = DeviceArray::from(positions);
  DeviceArray output(static_cast<std::size_t>(kTokens * kHidden) * 2);
  output.fill_bytes(0xff);
  op.run({{rows_device.data(), DType::kBF16, kRows, kHidden, 0},
          {positions_device.data(), DType::kInt32, kTokens, 1, 0},
          {gates_device.data(), DType::kFP32, kTokens, 1, 0},
          {output.data(), DType::kBF16, kTokens, kHidden, 0}},
         nullptr);
  const BadPositionReport report = op.check(nullptr);
  EXPECT_EQ(report.bad_positions, 2u);

  const std::vector<std::uint16_t> out = output.to_vector<std::uint16_t>(static_cast<std::size_t>(kTokens * kHidden));
  for (std::int64_t t = 0; t < kTokens; ++t) {
    for (std::int64_t h = 0; h < kHidden; ++h) {
      const float got = testing::bf16_to_float(out[static_cast<std::size_t>(t * kHidden + h)]);
      if (t == 13 || t == 17) {
        ASSERT_TRUE(std::isnan(got)) << "token " << t << " names a bad row and must be poisoned";
        continue;
      }
      const std::int32_t p = positions[static_cast<std::size_t>(t)];
      const double expected = p < 0 ? 0.0
                                    : static_cast<double>(gates[static_cast<std::size_t>(t)]) *
                                          rows[static_cast<std::size_t>(p * kHidden + h)];
      // One product rounded to bf16: within one bf16 unit of the exact value.
      ASSERT_NEAR(got, expected, std::abs(expected) / 128 + 1e-30) << "token " << t << " column " << h;
    }
  }
  // The record was cleared by check().
  EXPECT_EQ(op.check(nullptr).bad_positions, 0u);

  // No tokens: positions, gates and output absent (null and zeroed, as a C caller leaves them).
  op.run({{rows_device.data(), DType::kBF16, kRows, kHidden, 0}, {}, {}, {}}, nullptr);
  EXPECT_EQ(op.check(nullptr).bad_positions, 0u);

  // A negative token count is refused by name before anything is enqueued.
  try {
    op.run({{rows_device.data(), DType::kBF16, kRows, kHidden, 0},
            {positions_device.data(), DType::kInt32, -1, 1, 0},
            {gates_device.data(), DType::kFP32, -1, 1, 0},
            {output.data(), DType::kBF16, -1, kHidden, 0}},
           nullptr);
    ADD_FAILURE() << "a combine of -1 tokens was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("output has -1 rows"), std::string::npos) << e.what();
  }
}

TEST_F(OneRankCollectives, ReduceScatterOfOneRankIsACopy) {
  for (DType dtype : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    constexpr std::int64_t kHidden = 264, kRows = 37;
    Runtime runtime;
    Communicator comm = one_rank(runtime);
    ReduceScatterConfig config;
    config.dtype = dtype;
    config.hidden = kHidden;
    config.rows_per_rank = {kRows};
    ReduceScatter op(runtime, comm, config);
    EXPECT_EQ(op.path(), CollectivePath::kNccl);
    std::vector<std::uint8_t> bytes;
    testing::random_values(31, kRows * kHidden, 2.0f, dtype, bytes);
    DeviceArray input = DeviceArray::from(bytes);
    DeviceArray output(bytes.size());
    output.fill_bytes(0xff);
    op.run({input.data(), dtype, kRows, kHidden, 0}, {output.data(), dtype, kRows, kHidden, 0}, nullptr);
    op.check(nullptr);
    EXPECT_EQ(output.to_vector<std::uint8_t>(bytes.size()), bytes) << dtype_name(dtype);
  }
}

// Blocks the stream it is enqueued on for a while (a host function may not call CUDA).
void CUDA_CB hold_the_stream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(800)); }

// A collective waits behind 0.8 s of other work on the caller's stream, so the watchdog keeps
// polling its events, while this thread captures a graph in the global mode (PyTorch's default),
// in which another thread's unsafe call, such as an event query, would invalidate the capture.
TEST_F(OneRankCollectives, TheWatchdogLeavesAGlobalCaptureOnAnotherThreadIntact) {
  constexpr std::int64_t kHidden = 256, kRows = 64;
  Runtime runtime;
  Communicator comm = one_rank(runtime);
  const DeviceContext& device = runtime.impl().device(0);
  const DriverApi& cu = driver();
  ReduceScatterConfig config;
  config.hidden = kHidden;
  config.rows_per_rank = {kRows};
  ReduceScatter op(runtime, comm, config);
  std::vector<std::uint8_t> bytes;
  testing::random_values(41, kRows * kHidden, 1.0f, DType::kBF16, bytes);
  DeviceArray input = DeviceArray::from(bytes);
  DeviceArray output(bytes.size());
  DeviceArray scratch(4096);
  OwnedStream capture_stream(device);

  ScopedContext scope(device);
  ASSERT_EQ(cu.cuLaunchHostFunc(nullptr, hold_the_stream, nullptr), CUDA_SUCCESS);
  op.run({input.data(), DType::kBF16, kRows, kHidden, 0}, {output.data(), DType::kBF16, kRows, kHidden, 0}, nullptr);
  ASSERT_EQ(cu.cuStreamBeginCapture(capture_stream.get(), CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  ASSERT_EQ(cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(scratch.data()), 0, 4096, capture_stream.get()),
            CUDA_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // several of the watchdog's polls
  CUgraph graph = nullptr;
  const CUresult ended = cu.cuStreamEndCapture(capture_stream.get(), &graph);
  if (graph != nullptr) cu.cuGraphDestroy(graph);
  EXPECT_EQ(ended, CUDA_SUCCESS) << "the capture was invalidated";

  op.check(nullptr);
  EXPECT_EQ(output.to_vector<std::uint8_t>(bytes.size()), bytes);
  EXPECT_FALSE(comm.aborted());
}

// check() waits for the stream on the host: during a capture of that stream it is refused by
// name before it enqueues anything (the capture ends clean), for either op; outside, it runs.
TEST_F(OneRankCollectives, CheckDuringACaptureOfItsStreamIsRefusedByName) {
  constexpr std::int64_t kHidden = 64, kRows = 8;
  Runtime runtime;
  Communicator comm = one_rank(runtime);
  ReduceScatterConfig rs_config;
  rs_config.hidden = kHidden;
  rs_config.rows_per_rank = {kRows};
  ReduceScatter reduce_scatter(runtime, comm, rs_config);
  MoeCombineConfig moe_config;
  moe_config.hidden = kHidden;
  moe_config.capacity = kRows;
  MoeCombine moe_combine(runtime, comm, moe_config);
  const DeviceContext& device = runtime.impl().device(0);
  const DriverApi& cu = driver();
  ScopedContext scope(device);
  OwnedStream stream(device);
  const std::pair<const char*, std::function<void()>> checks[] = {
      {"ReduceScatter::check", [&] { reduce_scatter.check(stream.get()); }},
      {"MoeCombine::check", [&] { moe_combine.check(stream.get()); }},
  };
  for (const auto& [name, check] : checks) {
    ASSERT_EQ(cu.cuStreamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), CUDA_SUCCESS);
    std::string message;
    try {
      check();
      ADD_FAILURE() << name << " was accepted during a capture of its stream";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
      message = error.what();
    }
    CUgraph graph = nullptr;
    ASSERT_EQ(cu.cuStreamEndCapture(stream.get(), &graph), CUDA_SUCCESS) << name << ": the capture was invalidated";
    std::size_t nodes = 0;
    EXPECT_EQ(cu.cuGraphGetNodes(graph, nullptr, &nodes), CUDA_SUCCESS);
    cu.cuGraphDestroy(graph);
    EXPECT_EQ(nodes, 0u) << name << " enqueued work";
    EXPECT_NE(message.find(std::string(name) + " waits for the stream"), std::string::npos) << message;
    check();
  }
  EXPECT_FALSE(comm.aborted());
}

}  // namespace
}  // namespace shardjit
