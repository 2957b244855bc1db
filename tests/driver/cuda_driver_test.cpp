// The library starts without a GPU or a driver; GPU operations there fail with a clear error.
#include <gtest/gtest.h>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/device.hpp"
#include "shardjit/shardjit.hpp"
#include "support/temp_dir.hpp"

namespace shardjit {
namespace {

TEST(CudaDriver, ArchOfComputeCapability) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(8, 0), "sm_80");
  EXPECT_EQ(arch_for_compute_capability(8, 9), "sm_89");
}

TEST(CudaDriver, DeviceCountNeverThrows) { EXPECT_GE(device_count(), 0); }

TEST(CudaDriver, GpuOperationWithoutAGpuIsAClearError) {
  if (device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  try {
    DeviceContext context(0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_TRUE(e.code() == ErrorCode::kNoDevice || e.code() == ErrorCode::kInvalidArgument) << e.what();
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(CudaDriver, RuntimeAndOpConfigChecksWorkWithoutAGpu) {
  testing::TempDir dir;
  RuntimeOptions options;
  options.cache_dir = (dir.path() / "cache").string();
  Runtime runtime(options);  // no driver is opened here
  LinearLogpConfig config;
  config.hidden = 64;
  config.vocab_local = 300;
  config.temperature = -1.0f;
  EXPECT_THROW(LinearLogp(runtime, config), Error);  // config errors come before any GPU use
  if (device_count() > 0) return;
  config.temperature = 1.0f;
  try {
    LinearLogp op(runtime, config);
    FAIL() << "expected a no-device error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNoDevice) << e.what();
  }
}

}  // namespace
}  // namespace shardjit
