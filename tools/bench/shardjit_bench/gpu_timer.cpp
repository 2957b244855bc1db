#include "gpu_timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

namespace shardjit::bench {
namespace {

// The upper median of `values` (reorders them).
template <class T>
T median_of(std::vector<T>& values) {
  std::nth_element(values.begin(), values.begin() + static_cast<long>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

}  // namespace

double median_ms(const std::function<void()>& work, cudaStream_t stream, const TimingOptions& options) {
  return interleaved_median_ms({work}, stream, options).front();
}

std::vector<double> interleaved_median_ms(const std::vector<std::function<void()>>& works, cudaStream_t stream,
                                          const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) {
    for (const auto& work : works) work();
  }
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  // events[2 * (round * works + w)] and the next one bracket work w's call of that round.
  const std::size_t samples = static_cast<std::size_t>(options.iterations) * works.size();
  std::vector<cudaEvent_t> events(2 * samples);
  for (auto& e : events) check_cuda(cudaEventCreate(&e), "cudaEventCreate");
  for (std::size_t s = 0; s < samples; ++s) {
    check_cuda(cudaEventRecord(events[2 * s], stream), "cudaEventRecord");
    works[s % works.size()]();
    check_cuda(cudaEventRecord(events[2 * s + 1], stream), "cudaEventRecord");
  }
  check_cuda(cudaStreamSynchronize(stream), "timed runs");
  std::vector<std::vector<float>> times(works.size());
  for (std::size_t s = 0; s < samples; ++s) {
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, events[2 * s], events[2 * s + 1]), "cudaEventElapsedTime");
    times[s % works.size()].push_back(ms);
  }
  for (auto& e : events) cudaEventDestroy(e);
  std::vector<double> medians;
  for (auto& t : times) medians.push_back(median_of(t));
  return medians;
}

double graph_median_ms(const std::function<void()>& work, int calls, cudaStream_t stream, const TimingOptions& options) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < calls; ++i) work();
  check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  const double per_graph =
      median_ms([&] { check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); }, stream, options);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return per_graph / calls;
}

BurstTiming burst_median(const std::function<void()>& work, int calls, cudaStream_t stream,
                         const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) work();
  check_cuda(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t begin = nullptr, end = nullptr;
  check_cuda(cudaEventCreate(&begin), "cudaEventCreate");
  check_cuda(cudaEventCreate(&end), "cudaEventCreate");
  std::vector<double> gpu, host;
  for (int i = 0; i < options.iterations; ++i) {
    check_cuda(cudaEventRecord(begin, stream), "cudaEventRecord");
    const auto started = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) work();
    const auto enqueued = std::chrono::steady_clock::now();
    check_cuda(cudaEventRecord(end, stream), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(end), "cudaEventSynchronize");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
    gpu.push_back(static_cast<double>(ms) / calls);
    host.push_back(std::chrono::duration<double, std::milli>(enqueued - started).count() / calls);
  }
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return {median_of(gpu), median_of(host)};
}

std::size_t device_free_bytes() {
  std::size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

}  // namespace shardjit::bench
