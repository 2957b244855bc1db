#include "runtime/driver/event_pool.hpp"

#include <utility>

namespace shardjit {

EventPool::EventPool(const DeviceContext& device) : device_(device), spare_(std::make_shared<Spare>()) {}

std::shared_ptr<OwnedEvent> EventPool::take() {
  OwnedEvent event;
  {
    std::lock_guard<std::mutex> lock(spare_->mutex);
    if (!spare_->events.empty()) {
      event = std::move(spare_->events.back());
      spare_->events.pop_back();
    }
  }
  if (event.get() == nullptr) event = OwnedEvent(device_);
  std::weak_ptr<Spare> home = spare_;
  return std::shared_ptr<OwnedEvent>(new OwnedEvent(std::move(event)), [home](OwnedEvent* taken) {
    if (const std::shared_ptr<Spare> spare = home.lock()) {
      std::lock_guard<std::mutex> lock(spare->mutex);
      try {
        spare->events.push_back(std::move(*taken));
      } catch (...) {
        // No room to keep it: the event is destroyed below instead.
      }
    }
    delete taken;
  });
}

}  // namespace shardjit
