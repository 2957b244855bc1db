#include "runtime/cache/memory_cache.hpp"

namespace shardjit {

MemoryCache::MemoryCache(std::size_t max_entries) : max_entries_(max_entries == 0 ? 1 : max_entries) {}

MemoryCache::Value MemoryCache::get_or_compute(const std::string& key,
                                               const std::function<Value()>& make, bool* computed) {
  if (computed != nullptr) *computed = false;
  std::promise<Value> promise;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    auto found = slots_.find(key);
    if (found != slots_.end()) {
      recency_.splice(recency_.begin(), recency_, found->second.recency);
      std::shared_future<Value> value = found->second.value;
      lock.unlock();  // an entry in flight in another thread is waited for outside the lock
      return value.get();
    }
    recency_.push_front(key);
    slots_.emplace(key, Slot{promise.get_future().share(), recency_.begin(), false});
  }

  Value result;
  try {
    result = make();
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = slots_.find(key);
    if (found != slots_.end()) {
      recency_.erase(found->second.recency);
      slots_.erase(found);
    }
    throw;
  }
  promise.set_value(result);
  if (computed != nullptr) *computed = true;
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = slots_.find(key);
  if (found != slots_.end()) found->second.ready = true;
  evict_locked();
  return result;
}

std::size_t MemoryCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

bool MemoryCache::contains(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.count(key) != 0;
}

void MemoryCache::evict_locked() {
  // Oldest first; entries still being computed are skipped (their callers hold the future).
  auto it = recency_.end();
  while (slots_.size() > max_entries_ && it != recency_.begin()) {
    --it;
    auto slot = slots_.find(*it);
    if (slot == slots_.end() || !slot->second.ready) continue;
    slots_.erase(slot);
    it = recency_.erase(it);
  }
}

}  // namespace shardjit
