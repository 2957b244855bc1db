#include "runtime/sched/launch.hpp"

namespace shardjit {

void allow_dynamic_smem(const LoadedKernel& kernel, unsigned bytes) {
  SHARDJIT_CU(cuFuncSetAttribute(kernel.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(bytes)));
}

}  // namespace shardjit
