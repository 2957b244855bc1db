// A bounded pool of threads that runs kernel builds (cache look-ups that may end in NVRTC), so
// that the kernels one op asks for compile side by side: its build then takes about as long as
// its slowest kernel, not their sum. One pool per runtime, shared by all its ops; its size is
// SHARDJIT_COMPILE_JOBS (default: the hardware threads). Threads start when work first needs
// them and stay until the pool is destroyed. A task that throws hands its error to its waiter;
// the other tasks run on.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace shardjit {

class CompilePool {
 public:
  // `threads`: the most tasks that run at once; 0 means one.
  explicit CompilePool(std::size_t threads);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  // Queues `task`; the future is ready when it has run, holding its exception if it threw.
  // A task must not wait on another task of the same pool (the pool is bounded).
  std::future<void> submit(std::function<void()> task);

  std::size_t max_threads() const { return max_threads_; }
  // Threads started so far (never more than max_threads()).
  std::size_t started_threads() const;

 private:
  void work();

  const std::size_t max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  std::vector<std::thread> threads_;
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

// The pool size SHARDJIT_COMPILE_JOBS = 0 stands for: the hardware threads, at least one.
std::size_t default_compile_jobs();

}  // namespace shardjit
