// `shardjit info`: what this machine and this build of shardjit offer, as text or JSON. The first
// thing to ask for in a bug report, so it works on machines with no GPU, driver or NCCL.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "tools/cli/commands.hpp"
#include "tools/cli/format.hpp"
#include "tools/cli/info_report.hpp"

namespace shardjit::cli {
namespace {

using nlohmann::json;

std::string join(const std::vector<std::string>& parts) {
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : " ") + part;
  return text;
}

json optional_text(const std::optional<std::string>& text) { return text ? json(*text) : json(nullptr); }

// Why something is missing, or null when nothing is.
json problem_text(const std::string& problem) { return problem.empty() ? json(nullptr) : json(problem); }

json devices_json(const InfoReport& report) {
  json devices = json::array();
  for (const DeviceInfo& device : report.devices) {
    devices.push_back({{"ordinal", device.ordinal},
                       {"name", device.name},
                       {"compute_capability", std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor)},
                       {"arch", arch_for_compute_capability(device.cc_major, device.cc_minor)},
                       {"sms", device.sm_count},
                       {"memory_bytes", device.total_memory}});
  }
  return devices;
}

json knobs_json(const InfoReport& report) {
  json knobs = json::array();
  for (const KnobReport& knob : report.knobs) {
    knobs.push_back({{"name", knob.knob.name},
                     {"type", knob.knob.type},
                     {"value", optional_text(knob.value)},
                     {"default", knob.knob.default_value},
                     {"doc", knob.knob.doc}});
  }
  return knobs;
}

void print_json(const InfoReport& report) {
  json info = {
      {"version", report.version},
      {"nvrtc", {{"version", report.nvrtc_version}, {"identity", report.nvrtc_identity}, {"archs", report.nvrtc_archs}}},
      {"prebuilt_kernels", {{"count", report.prebuilt_kernels}, {"archs", report.prebuilt_archs}}},
      {"driver", {{"version", optional_text(report.driver_version)}, {"error", problem_text(report.driver_problem)}}},
      {"nccl", {{"version", optional_text(report.nccl_version)}, {"error", problem_text(report.nccl_problem)}}},
      {"devices", devices_json(report)},
      {"devices_error", problem_text(report.devices_problem)},
      {"cache",
       {{"dir", report.cache.dir},
        {"exists", report.cache.exists},
        {"entries", report.cache.entries},
        {"bytes", report.cache.bytes},
        {"error", optional_text(report.cache.problem)}}},
      {"env", knobs_json(report)}};
  std::printf("%s\n", info.dump(2).c_str());
}

void print_devices(const InfoReport& report) {
  if (report.devices.empty()) {
    std::printf("GPUs:         no GPU\n");
    if (!report.devices_problem.empty()) std::printf("  %s\n", report.devices_problem.c_str());
    return;
  }
  std::printf("GPUs:         %zu\n", report.devices.size());
  for (const DeviceInfo& device : report.devices) {
    std::printf("  %d: %s, compute capability %d.%d, %s, %d SMs, %s\n", device.ordinal, device.name.c_str(),
                device.cc_major, device.cc_minor, arch_for_compute_capability(device.cc_major, device.cc_minor).c_str(),
                device.sm_count, format_bytes(device.total_memory).c_str());
  }
  if (!report.devices_problem.empty()) std::printf("  %s\n", report.devices_problem.c_str());
}

void print_cache(const CacheReport& cache) {
  if (cache.problem) {
    std::printf("cache:        %s (unusable: %s)\n", cache.dir.c_str(), cache.problem->c_str());
  } else if (!cache.exists) {
    std::printf("cache:        %s (not created yet)\n", cache.dir.c_str());
  } else {
    std::printf("cache:        %s: %zu kernels, %s\n", cache.dir.c_str(), cache.entries,
                format_bytes(cache.bytes).c_str());
  }
}

void print_knobs(const InfoReport& report) {
  std::printf("environment:\n");
  for (const KnobReport& knob : report.knobs) {
    std::printf("  %s = %s  [%s; default: %s]\n      %s\n", knob.knob.name,
                knob.value ? knob.value->c_str() : "(unset)", knob.knob.type, knob.knob.default_value,
                knob.knob.doc);
  }
}

void print_text(const InfoReport& report) {
  std::printf("shardjit:     %s\n", report.version.c_str());
  std::printf("NVRTC:        %s (targets: %s)\n", report.nvrtc_identity.c_str(), join(report.nvrtc_archs).c_str());
  // Kernels no op shape changes, compiled when the library was built (used where this NVRTC and
  // the embedded templates are the ones they were built with).
  std::printf("Prebuilt:     %zu kernels (%s)\n", report.prebuilt_kernels,
              report.prebuilt_archs.empty() ? "none" : join(report.prebuilt_archs).c_str());
  if (report.driver_version) {
    std::printf("CUDA driver:  %s\n", report.driver_version->c_str());
  } else {
    std::printf("CUDA driver:  no driver (%s)\n", report.driver_problem.c_str());
  }
  if (report.nccl_version) {
    std::printf("NCCL:         %s\n", report.nccl_version->c_str());
  } else {
    std::printf("NCCL:         not found (%s)\n", report.nccl_problem.c_str());
  }
  print_devices(report);
  print_cache(report.cache);
  print_knobs(report);
}

int run(const GlobalOptions& globals, bool json_output) {
  const InfoReport report = collect_info(resolve_cli_config(globals));
  if (json_output) {
    print_json(report);
  } else {
    print_text(report);
  }
  return kExitOk;
}

}  // namespace

Command add_info_command(CLI::App& app, const GlobalOptions& globals) {
  auto json_output = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("info", "Versions, GPUs, the cache and the environment knobs");
  sub->add_flag("--json", *json_output, "Print one JSON object instead of text");
  return Command{sub, [&globals, json_output] { return run(globals, *json_output); }};
}

}  // namespace shardjit::cli
