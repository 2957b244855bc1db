// The board's energy counter (NVML, loaded at run time): the joules a call of GPU work takes and
// the board's average power meanwhile. At llama3-8b-16k an H200 runs at its power cap, where the
// time of a kernel follows its energy rather than its cycles (docs/perf-notes.md, "The power
// cap"), so the benchmark can report both.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <optional>

namespace shardjit::bench {

struct EnergyPerCall {
  double joules = 0;  // per call
  double watts = 0;   // the board's average over the measurement
  int calls = 0;
};

class BoardEnergy {
 public:
  // The board of CUDA device `device`; ok() is false where NVML or its energy counter is missing.
  explicit BoardEnergy(int device);
  bool ok() const { return device_ != nullptr; }

  // Runs `work` on `stream` back to back for at least `seconds` (the counter moves in steps of
  // tens of milliseconds) after one untimed call; nullopt when !ok().
  std::optional<EnergyPerCall> measure(const std::function<void()>& work, cudaStream_t stream, double seconds) const;

 private:
  bool total_millijoules(unsigned long long& value) const;

  void* device_ = nullptr;  // nvmlDevice_t
  int (*get_total_energy_)(void*, unsigned long long*) = nullptr;
};

}  // namespace shardjit::bench
