// The in-process level of the kernel cache: single flight per key (the first caller computes,
// concurrent callers of the same key wait for it; different keys proceed in parallel), bounded
// by an entry count with least-recently-used eviction. A failed computation is not cached: the
// waiters get its error and the next caller tries again.
#pragma once

#include <cstddef>
#include <functional>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "runtime/compile/nvrtc_compiler.hpp"

namespace shardjit {

class MemoryCache {
 public:
  using Value = std::shared_ptr<const CompiledKernel>;

  explicit MemoryCache(std::size_t max_entries);

  // `computed` (optional) tells whether this call ran `make`.
  Value get_or_compute(const std::string& key, const std::function<Value()>& make,
                       bool* computed = nullptr);
  std::size_t size() const;
  // Whether `key` is held, computed or in flight (a get_or_compute of it would not run `make`).
  bool contains(const std::string& key) const;

 private:
  struct Slot {
    std::shared_future<Value> value;
    std::list<std::string>::iterator recency;
    bool ready = false;
  };
  void evict_locked();

  std::size_t max_entries_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;
  std::list<std::string> recency_;  // front: most recently used
};

}  // namespace shardjit
