// Kernels compiled when the library was built: the ones no op shape changes (on the Hopper loop
// LinearLogp's forward, dZ and kept-chunk kernels; the backward's GEMMs, the bias, scale and
// combine kernels; ReduceScatter's), so that an op's first build compiles only its
// shape-specialized kernels (on sm_90a with 16-bit inputs, none of a LinearLogp op's). Each is
// found by its content key, the same key the disk cache and NVRTC path use
// (runtime/cache/cache_key.hpp): an entry whose inputs differ from this process's (another NVRTC,
// a template folder, another library version) is simply never found. The table is generated at
// build time by tools/prebuild (cmake/prebuilt_kernels.cmake).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace shardjit {

struct PrebuiltKernel {
  const char* key;           // cache_key() of the inputs that made it
  const char* spec_text;     // canonical KernelSpec text
  const char* arch;          // e.g. "sm_90a"
  const char* lowered_name;  // the kernel's mangled name inside the CUBIN
  const unsigned char* cubin;
  std::size_t cubin_size;
};

// The generated table (empty in the generator itself, and where the build turned it off).
std::span<const PrebuiltKernel> prebuilt_kernel_table();

// The table indexed by key.
class PrebuiltKernels {
 public:
  PrebuiltKernels();
  explicit PrebuiltKernels(std::span<const PrebuiltKernel> table);

  const PrebuiltKernel* find(std::string_view key) const;
  std::size_t size() const { return by_key_.size(); }
  // The archs the table has kernels for, sorted, each once.
  std::vector<std::string> archs() const;

 private:
  std::unordered_map<std::string_view, const PrebuiltKernel*> by_key_;
};

}  // namespace shardjit
