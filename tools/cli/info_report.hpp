// What `shardjit info` reports: versions of shardjit and of the libraries it loads, the GPUs, the
// cache and the environment knobs. Collecting never fails: whatever cannot be found (no driver,
// no GPU, no NCCL, an unusable cache folder) is reported with the reason instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tooling.hpp"

namespace shardjit::cli {

struct CacheReport {
  std::string dir;
  bool exists = false;
  std::size_t entries = 0;
  std::uint64_t bytes = 0;
  std::optional<std::string> problem;  // why the folder cannot be used
};

struct KnobReport {
  EnvKnob knob;
  std::optional<std::string> value;  // as set in the environment; nullopt when unset
};

struct InfoReport {
  std::string version;
  std::string nvrtc_version;   // MAJOR.MINOR
  std::string nvrtc_identity;  // with the library file and size (part of every cache key)
  std::vector<std::string> nvrtc_archs;
  std::size_t prebuilt_kernels = 0;          // built with the library (runtime/cache/prebuilt_kernels.hpp)
  std::vector<std::string> prebuilt_archs;
  std::optional<std::string> driver_version;  // "13.0"
  std::string driver_problem;                 // set when driver_version is not
  std::optional<std::string> nccl_version;    // "2.27.3"
  std::string nccl_problem;                   // set when nccl_version is not
  std::vector<DeviceInfo> devices;
  std::string devices_problem;                // set when a device could not be queried
  CacheReport cache;
  std::vector<KnobReport> knobs;
};

InfoReport collect_info(const RuntimeConfig& config);

}  // namespace shardjit::cli
