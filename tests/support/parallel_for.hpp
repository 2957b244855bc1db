// Runs the test references' per-row loops on all cores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace shardjit::testing {

// body(worker, i) for i in [0, count): worker w (below hardware_concurrency) takes the w-th
// contiguous chunk, so a body may keep per-worker partial sums indexed by worker.
template <class Body>
void parallel_for(std::int64_t count, const Body& body) {
  const std::int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t chunk = (count + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (std::int64_t w = 0; w * chunk < count; ++w) {
    threads.emplace_back([&, w] {
      for (std::int64_t i = w * chunk; i < std::min(count, (w + 1) * chunk); ++i) body(w, i);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace shardjit::testing
