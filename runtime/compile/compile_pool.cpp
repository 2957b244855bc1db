#include "runtime/compile/compile_pool.hpp"

#include <system_error>

namespace shardjit {

CompilePool::CompilePool(std::size_t threads) : max_threads_(threads == 0 ? 1 : threads) {}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

std::future<void> CompilePool::submit(std::function<void()> task) {
  std::packaged_task<void()> packaged(std::move(task));
  std::future<void> done = packaged.get_future();
  std::unique_lock<std::mutex> lock(mutex_);
  queue_.push_back(std::move(packaged));
  // A new thread only where no idle one will take the task.
  if (idle_ < queue_.size() && threads_.size() < max_threads_) {
    try {
      threads_.emplace_back([this] { work(); });
    } catch (const std::system_error&) {
      // Out of threads: those already started take the task; with none, run it here.
      if (threads_.empty()) {
        std::packaged_task<void()> own = std::move(queue_.back());
        queue_.pop_back();
        lock.unlock();
        own();
        return done;
      }
    }
  }
  lock.unlock();
  wake_.notify_one();
  return done;
}

std::size_t CompilePool::started_threads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return threads_.size();
}

void CompilePool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    ++idle_;
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping, nothing left to run
    std::packaged_task<void()> task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();  // a packaged task keeps its exception for the future
    lock.lock();
  }
}

std::size_t default_compile_jobs() {
  const unsigned threads = std::thread::hardware_concurrency();
  return threads == 0 ? 1 : threads;
}

}  // namespace shardjit
