// Events reused across calls: a call that needs an event of its own for a while (a collective
// the watchdog follows) takes one from the pool instead of creating one, which would cost a
// driver call per call.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/driver/stream.hpp"

namespace shardjit {

class EventPool {
 public:
  explicit EventPool(const DeviceContext& device);

  // An event (no timing) of the device, taken from the pool or made. It goes back to the pool
  // when the last copy of the pointer is gone; after the pool is gone, it is destroyed instead.
  // Thread-safe.
  std::shared_ptr<OwnedEvent> take();

 private:
  struct Spare {
    std::mutex mutex;
    std::vector<OwnedEvent> events;
  };
  const DeviceContext& device_;
  std::shared_ptr<Spare> spare_;
};

}  // namespace shardjit
