// The compile pool: every task runs, no more than its bound at once, errors reach the waiter.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "runtime/compile/compile_pool.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// Counts the tasks inside it at once; each task stays `hold` long so that they overlap.
struct Overlap {
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> ran{0};
  void task(std::chrono::milliseconds hold) {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(hold);
    --inside;
    ++ran;
  }
};

TEST(CompilePool, RunsEveryTaskAndNeverMoreThanItsBoundAtOnce) {
  CompilePool pool(3);
  Overlap overlap;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 12; ++i) done.push_back(pool.submit([&] { overlap.task(std::chrono::milliseconds(30)); }));
  for (auto& task : done) task.get();
  EXPECT_EQ(overlap.ran.load(), 12);
  EXPECT_EQ(overlap.most.load(), 3);  // the bound is reached (tasks sleep) and never passed
  EXPECT_EQ(pool.started_threads(), 3u);
}

TEST(CompilePool, TasksRunSideBySideSoTheBatchTakesAboutOneTaskTime) {
  CompilePool pool(4);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::future<void>> done;
  for (int i = 0; i < 4; ++i) {
    done.push_back(pool.submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); }));
  }
  for (auto& task : done) task.get();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, std::chrono::milliseconds(600));  // one after another: 800 ms
}

TEST(CompilePool, AThrowingTaskHandsItsErrorToItsWaiterAndTheOthersStillRun) {
  CompilePool pool(2);
  std::atomic<int> ran{0};
  std::vector<std::future<void>> done;
  for (int i = 0; i < 6; ++i) {
    done.push_back(pool.submit([&, i] {
      if (i == 2) throw Error(ErrorCode::kCompileFailed, "kernel 2 does not compile");
      ++ran;
    }));
  }
  for (int i = 0; i < 6; ++i) {
    if (i != 2) {
      EXPECT_NO_THROW(done[static_cast<std::size_t>(i)].get());
      continue;
    }
    try {
      done[2].get();
      FAIL() << "expected the task's error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCompileFailed);
      EXPECT_NE(std::string(e.what()).find("kernel 2 does not compile"), std::string::npos);
    }
  }
  EXPECT_EQ(ran.load(), 5);
}

TEST(CompilePool, ABoundOfZeroMeansOneThread) {
  CompilePool pool(0);
  EXPECT_EQ(pool.max_threads(), 1u);
  Overlap overlap;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 3; ++i) done.push_back(pool.submit([&] { overlap.task(std::chrono::milliseconds(10)); }));
  for (auto& task : done) task.get();
  EXPECT_EQ(overlap.most.load(), 1);
  EXPECT_EQ(overlap.ran.load(), 3);
}

TEST(CompilePool, StartsNoThreadUntilWorkComesAndRunsQueuedTasksBeforeItIsDestroyed) {
  std::atomic<int> ran{0};
  {
    CompilePool pool(2);
    EXPECT_EQ(pool.started_threads(), 0u);
    for (int i = 0; i < 5; ++i) {
      pool.submit([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ++ran;
      });
    }
  }  // the futures are dropped: the destructor still runs what was queued
  EXPECT_EQ(ran.load(), 5);
}

TEST(CompilePool, DefaultSizeIsTheHardwareThreads) {
  EXPECT_EQ(default_compile_jobs(), std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace shardjit
