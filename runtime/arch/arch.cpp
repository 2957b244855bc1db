#include "runtime/arch/arch.hpp"

namespace shardjit {

unsigned smem_limit_for_arch(const std::string& arch) {
  // Opt-in shared memory per block (CUDA programming guide, compute capability tables).
  if (arch.rfind("sm_90", 0) == 0 || arch.rfind("sm_100", 0) == 0) return 232448;
  if (arch == "sm_80" || arch == "sm_87") return 166912;
  return 101376;  // sm_86, sm_89, sm_120 and unknown: the smallest of the data-center tiers
}

bool wgmma_applies(DType dtype, const std::string& arch, bool hopper_path) {
  // wgmma exists on sm_90a alone (not on sm_90, nor on later parts' arch-specific targets).
  return hopper_path && arch == "sm_90a" && dtype != DType::kFP32;
}

}  // namespace shardjit
