#include "runtime/cache/prebuilt_kernels.hpp"

#include <set>

namespace shardjit {

PrebuiltKernels::PrebuiltKernels() : PrebuiltKernels(prebuilt_kernel_table()) {}

PrebuiltKernels::PrebuiltKernels(std::span<const PrebuiltKernel> table) {
  for (const PrebuiltKernel& kernel : table) by_key_.emplace(kernel.key, &kernel);
}

const PrebuiltKernel* PrebuiltKernels::find(std::string_view key) const {
  auto found = by_key_.find(key);
  return found == by_key_.end() ? nullptr : found->second;
}

std::vector<std::string> PrebuiltKernels::archs() const {
  std::set<std::string> archs;
  for (const auto& [key, kernel] : by_key_) archs.insert(kernel->arch);
  return {archs.begin(), archs.end()};
}

}  // namespace shardjit
