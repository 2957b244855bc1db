// The communicator's host-side contract, on any machine: bad arguments and a missing GPU or
// NCCL are clear errors raised before anything waits; every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>

#include "runtime/comm/bounded_wait.hpp"
#include "runtime/comm/nccl_library.hpp"
#include "runtime/driver/device.hpp"
#include "shardjit/shardjit.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

using std::chrono::milliseconds;

RuntimeOptions options_in(const testing::TempDir& dir) {
  RuntimeOptions options;
  options.cache_dir = (dir.path() / "cache").string();
  return options;
}

ErrorCode code_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kOk;
}

TEST(Communicator, RejectsABadRankOrSizeOrTimeoutFirst) {
  testing::TempDir dir;
  Runtime runtime(options_in(dir));
  const CommUniqueId id{};
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, 2, 2, id); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, -1, 2, id); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, 0, 0, id); }), ErrorCode::kInvalidArgument);
  CommOptions no_time;
  no_time.timeout = milliseconds(0);
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, 0, 1, id, no_time); }), ErrorCode::kInvalidArgument);
  // "Forever" as the largest number is refused by name: a deadline that far out would wrap.
  CommOptions forever;
  forever.timeout = milliseconds(std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, 0, 1, id, forever); }), ErrorCode::kInvalidArgument);
  forever.timeout = kMaxCommTimeout + milliseconds(1);
  EXPECT_EQ(code_of([&] { Communicator::create(runtime, 0, 0, 1, id, forever); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { Communicator::wrap(runtime, nullptr, 0); }), ErrorCode::kInvalidArgument);
}

TEST(Communicator, WithoutNcclOrAGpuCreateIsAClearError) {
  if (nccl_available() && device_count() > 0) GTEST_SKIP() << "this machine has NCCL and a GPU";
  testing::TempDir dir;
  Runtime runtime(options_in(dir));
  try {
    Communicator::create(runtime, 0, 0, 1, CommUniqueId{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    // NCCL is looked for first, then the GPU.
    EXPECT_EQ(e.code(), nccl_available() ? ErrorCode::kNoDevice : ErrorCode::kCommError) << e.what();
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(Communicator, AUniqueIdNeedsNoGpu) {
  if (!nccl_available()) {
    EXPECT_EQ(code_of([] { Communicator::new_unique_id(); }), ErrorCode::kCommError);
    return;
  }
  CommUniqueId id{};
  try {
    id = Communicator::new_unique_id();
  } catch (const Error& e) {
    // NCCL may find no network interface for its bootstrap in a sandbox; that is its error.
    EXPECT_EQ(e.code(), ErrorCode::kCommError) << e.what();
    return;
  }
  bool any = false;
  for (char byte : id) any = any || byte != 0;
  EXPECT_TRUE(any) << "an id holds the bootstrap address";
}

TEST(BoundedWait, ReturnsAsSoonAsDone) {
  int calls = 0;
  EXPECT_TRUE(wait_until([&] { return ++calls == 3; }, milliseconds(5000)));
  EXPECT_EQ(calls, 3);
}

TEST(BoundedWait, GivesUpAfterTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  EXPECT_FALSE(wait_until([&] { return ++calls < 0; }, milliseconds(30)));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, milliseconds(30));
  EXPECT_LT(waited, milliseconds(2000));
  EXPECT_GE(calls, 2);
}

TEST(BoundedWait, ChecksOnceEvenWithNoTimeLeft) {
  int calls = 0;
  EXPECT_TRUE(wait_until([&] { return ++calls == 1; }, milliseconds(0)));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace shardjit
