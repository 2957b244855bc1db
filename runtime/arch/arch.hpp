// Facts about a compile target ("sm_80", "sm_90a", ...) that kernels of every op size themselves
// by: how much shared memory a block may use and whether the Hopper main loop exists there.
#pragma once

#include <string>

#include "shardjit/dtype.hpp"

namespace shardjit {

// Shared memory a block may opt into on `arch` (bytes), from the architecture tables.
unsigned smem_limit_for_arch(const std::string& arch);

// Whether the Hopper main loop (wgmma fed by TMA) applies: a 16-bit dtype on an sm_90a target,
// with hopper_path (RuntimeConfig, SHARDJIT_HOPPER_PATH) on.
bool wgmma_applies(DType dtype, const std::string& arch, bool hopper_path);

}  // namespace shardjit
