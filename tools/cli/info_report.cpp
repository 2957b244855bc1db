#include "tools/cli/info_report.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

#include "shardjit/error.hpp"
#include "shardjit/runtime.hpp"

namespace shardjit::cli {
namespace {

// ncclGetVersion(int*) returns an ncclResult_t, an enum whose success value is 0. Declared here
// rather than taken from nccl.h: NCCL is only looked for at run time, never linked.
using NcclGetVersion = int (*)(int*);

// NCCL encodes its version as MAJOR*10000 + MINOR*100 + PATCH since 2.9, MAJOR*1000 + ... before.
std::string nccl_version_text(int code) {
  const int major = code >= 10000 ? code / 10000 : code / 1000;
  const int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

void probe_nccl(InfoReport& report) {
  void* library = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = ::dlerror();
    report.nccl_problem = reason ? reason : "libnccl.so.2 could not be opened";
    return;
  }
  auto get_version = reinterpret_cast<NcclGetVersion>(::dlsym(library, "ncclGetVersion"));
  int code = 0;
  if (get_version == nullptr || get_version(&code) != 0) {
    report.nccl_problem = "libnccl.so.2 was found but did not report its version";
  } else {
    report.nccl_version = nccl_version_text(code);
  }
  ::dlclose(library);
}

void probe_driver(InfoReport& report) {
  try {
    const int version = tooling::cuda_driver_version();
    report.driver_version = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  } catch (const std::exception& error) {
    report.driver_problem = error.what();
  }
}

void probe_devices(InfoReport& report) {
  const int count = device_count();
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    try {
      report.devices.push_back(DeviceContext(ordinal).info());
    } catch (const std::exception& error) {
      report.devices_problem = "device " + std::to_string(ordinal) + ": " + error.what();
    }
  }
}

CacheReport probe_cache(const RuntimeConfig& config) {
  CacheReport cache;
  cache.dir = config.cache_dir;
  std::error_code error;
  cache.exists = std::filesystem::exists(config.cache_dir, error);
  try {
    // Read-only: asking about a cache must not create one.
    DiskCache disk(config.cache_dir, config.cache_max_bytes, false);
    cache.entries = disk.list().size();
    cache.bytes = disk.total_bytes();
  } catch (const std::exception& failure) {
    cache.problem = failure.what();
  }
  return cache;
}

std::vector<KnobReport> probe_knobs() {
  std::vector<KnobReport> knobs;
  for (const EnvKnob& knob : env_knobs()) {
    const char* value = std::getenv(knob.name);
    knobs.push_back({knob, value != nullptr && *value != '\0' ? std::optional<std::string>(value) : std::nullopt});
  }
  return knobs;
}

}  // namespace

InfoReport collect_info(const RuntimeConfig& config) {
  InfoReport report;
  report.version = version();
  report.nvrtc_version = NvrtcCompiler::version();
  report.nvrtc_identity = NvrtcCompiler::identity();
  report.nvrtc_archs = NvrtcCompiler::supported_archs();
  const PrebuiltKernels prebuilt;
  report.prebuilt_kernels = prebuilt.size();
  report.prebuilt_archs = prebuilt.archs();
  probe_driver(report);
  probe_nccl(report);
  probe_devices(report);
  report.cache = probe_cache(config);
  report.knobs = probe_knobs();
  return report;
}

}  // namespace shardjit::cli
