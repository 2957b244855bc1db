// The event pool: an event comes back to the pool when its last user lets it go and is handed
// out again, without a new cuEventCreate; one let go after the pool is gone is destroyed.
#include <gtest/gtest.h>

#include <memory>

#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/event_pool.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/shardjit.hpp"
#include "support/device_array.hpp"

namespace shardjit {
namespace {

class EventPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::gpu_available()) GTEST_SKIP() << testing::no_gpu_reason();
  }
};

TEST_F(EventPoolTest, AnEventLetGoIsHandedOutAgain) {
  Runtime runtime;
  const DeviceContext& device = runtime.impl().device(0);
  EventPool pool(device);
  std::shared_ptr<OwnedEvent> first = pool.take();
  std::shared_ptr<OwnedEvent> second = pool.take();
  ASSERT_NE(first->get(), nullptr);
  EXPECT_NE(first->get(), second->get()) << "two events in use at once are two events";
  const CUevent first_handle = first->get();
  first.reset();
  std::shared_ptr<OwnedEvent> again = pool.take();
  EXPECT_EQ(again->get(), first_handle) << "the event let go was not reused";

  // Still a working event: recorded on a stream and queried to completion.
  ScopedContext scope(device);
  ASSERT_EQ(driver().cuEventRecord(again->get(), nullptr), CUDA_SUCCESS);
  ASSERT_EQ(driver().cuEventSynchronize(again->get()), CUDA_SUCCESS);
  EXPECT_EQ(driver().cuEventQuery(again->get()), CUDA_SUCCESS);
}

TEST_F(EventPoolTest, AnEventOutlivingItsPoolIsDestroyedWhenLetGo) {
  Runtime runtime;
  const DeviceContext& device = runtime.impl().device(0);
  std::shared_ptr<OwnedEvent> kept;
  {
    EventPool pool(device);
    kept = pool.take();
  }
  ScopedContext scope(device);
  EXPECT_EQ(driver().cuEventRecord(kept->get(), nullptr), CUDA_SUCCESS);
  EXPECT_EQ(driver().cuEventSynchronize(kept->get()), CUDA_SUCCESS);
  kept.reset();  // no pool to go back to: destroyed, without touching the pool's freed state
}

}  // namespace
}  // namespace shardjit
