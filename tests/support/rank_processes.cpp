#include "support/rank_processes.hpp"

#include <exception>

#include "runtime/comm/nccl_library.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/device.hpp"

namespace shardjit::testing {
namespace {

// The probe's child: counts GPUs and tries to load NCCL.
void probe_in_child(RankContext& context) {
  RankReport& report = context.report;
  const int gpus = device_count();
  report.put_text("gpus", std::to_string(gpus));
  if (gpus == 0) {
    try {
      driver();
      report.put_text("problem", "the CUDA driver reports no GPU");
    } catch (const std::exception& e) {
      report.put_text("problem", e.what());
    }
  }
  const NcclLoad nccl_load = load_nccl(kNcclLibrary);
  report.put_text("nccl", nccl_load.ok ? "1" : "0");
  if (!nccl_load.ok) report.put_text("nccl_problem", nccl_load.error);
}

}  // namespace

const MultiGpuProbe& probe_multi_gpu() {
  static const MultiGpuProbe probe = [] {
    MultiGpuProbe result;
    const RankOutcome outcome = ranks::run_alone(probe_in_child);
    if (!outcome.finished || !outcome.error.empty()) {
      result.problem = "the probe process failed: " + (outcome.problem.empty() ? outcome.error : outcome.problem);
      return result;
    }
    const RankReport& report = outcome.report;
    result.gpus = std::stoi(report.text("gpus"));
    result.nccl = report.text("nccl") == "1";
    result.problem = report.text("problem");
    if (!result.nccl) result.problem += (result.problem.empty() ? "" : "; ") + report.text("nccl_problem");
    return result;
  }();
  return probe;
}

std::string multi_gpu_skip_reason(int ranks) {
  const MultiGpuProbe& probe = probe_multi_gpu();
  if (probe.gpus < ranks) {
    return "needs " + std::to_string(ranks) + " GPUs; this machine has " + std::to_string(probe.gpus) +
           (probe.problem.empty() ? std::string() : " (" + probe.problem + ")");
  }
  if (!probe.nccl) return "needs NCCL: " + probe.problem;
  return {};
}

}  // namespace shardjit::testing
