#include "board_energy.hpp"

#include <dlfcn.h>

#include <chrono>

#include "gpu_timer.hpp"

namespace shardjit::bench {
namespace {

// The few NVML entry points used, declared here so that the benchmark needs neither nvml.h nor
// libnvidia-ml at link time (NVML_SUCCESS is 0).
using InitFn = int (*)();
using HandleByBusIdFn = int (*)(const char*, void**);
using TotalEnergyFn = int (*)(void*, unsigned long long*);

}  // namespace

BoardEnergy::BoardEnergy(int device) {
  void* library = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return;
  const auto init = reinterpret_cast<InitFn>(::dlsym(library, "nvmlInit_v2"));
  const auto by_bus_id = reinterpret_cast<HandleByBusIdFn>(::dlsym(library, "nvmlDeviceGetHandleByPciBusId_v2"));
  const auto total = reinterpret_cast<TotalEnergyFn>(::dlsym(library, "nvmlDeviceGetTotalEnergyConsumption"));
  if (init == nullptr || by_bus_id == nullptr || total == nullptr || init() != 0) return;
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device) != cudaSuccess) return;
  void* handle = nullptr;
  unsigned long long probe = 0;
  if (by_bus_id(bus_id, &handle) != 0 || total(handle, &probe) != 0) return;
  device_ = handle;
  get_total_energy_ = total;
}

bool BoardEnergy::total_millijoules(unsigned long long& value) const {
  return get_total_energy_(device_, &value) == 0;
}

std::optional<EnergyPerCall> BoardEnergy::measure(const std::function<void()>& work, cudaStream_t stream,
                                                  double seconds) const {
  if (!ok()) return std::nullopt;
  work();
  check_cuda(cudaStreamSynchronize(stream), "energy warm-up");
  unsigned long long begin = 0, end = 0;
  if (!total_millijoules(begin)) return std::nullopt;
  const auto started = std::chrono::steady_clock::now();
  double elapsed = 0;
  int calls = 0;
  // In rounds of a few calls, so that the host's check of the clock does not idle the GPU.
  while (elapsed < seconds) {
    for (int i = 0; i < 4; ++i) work();
    calls += 4;
    check_cuda(cudaStreamSynchronize(stream), "energy runs");
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  if (!total_millijoules(end) || end < begin) return std::nullopt;
  const double joules = static_cast<double>(end - begin) / 1000.0;
  return EnergyPerCall{joules / calls, joules / elapsed, calls};
}

}  // namespace shardjit::bench
