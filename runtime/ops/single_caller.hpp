// One call at a time per op. An op's calls share its buffers (workspace, status word, peer
// slots, the kept chunk's record) and grow or clear them in place, so two threads inside one op
// at once would race on its host state and on the device memory both enqueue work into. The
// public calls of an op hold a SingleCaller::Scope: a second thread that enters meanwhile gets
// Error(kInvalidArgument) naming the call, instead of corrupting the op. The thread that holds
// it may enter again (a strict forward calls check()).
#pragma once

#include <atomic>
#include <string>
#include <thread>

#include "shardjit/error.hpp"

namespace shardjit {

class SingleCaller {
 public:
  class Scope {
   public:
    Scope(SingleCaller& caller, const char* call) {
      const std::thread::id self = std::this_thread::get_id();
      std::thread::id holder{};
      if (caller.holder_.compare_exchange_strong(holder, self)) {
        caller_ = &caller;
        return;
      }
      if (holder == self) return;  // entered again by the thread that holds it
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(call) +
                      ": another thread is inside a call of this op; an op takes one call at a time (its calls "
                      "share its buffers): give each thread its own op, or make the threads take turns");
    }
    ~Scope() {
      if (caller_ != nullptr) caller_->holder_.store(std::thread::id{});
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    SingleCaller* caller_ = nullptr;  // null when this scope entered again
  };

 private:
  std::atomic<std::thread::id> holder_{};
};

}  // namespace shardjit
