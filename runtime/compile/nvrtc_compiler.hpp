// NVRTC: specialized template source -> CUBIN for one arch. Owns each nvrtcProgram for the
// length of one compile. A failed compile raises Error(kCompileFailed) carrying the NVRTC log
// and the template lines it points at; the log is also written to the "shardjit" logger.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace shardjit {

// What the compiler is given: a flattened source and the template instance to take from it.
struct KernelSource {
  std::string spec_text;        // canonical KernelSpec text (for messages and dumps)
  std::string name_expression;  // C++ template instance, e.g. "shardjit::kernels::f<1, int>"
  std::string source;           // flattened template source (TemplateSources::flatten)
};

struct CompiledKernel {
  std::string spec_text;
  std::string arch;
  std::string lowered_name;  // the mangled symbol to look up in the module
  std::string cubin;
  std::string log;           // NVRTC's log (warnings), may be empty
};

// Whether ptxas reported a "Potential Performance Loss" in the kernel. Those seen so far:
//   C7515: the kernel's wgmma run one at a time ("wgmma.mma_async instructions are serialized
//          ..."); the Hopper main loops then lose their overlap of products with everything
//          else, typically a third or more of their speed. Any value kept live across the K loop
//          or touched between a wgmma and its wait can cause it (docs/perf-notes.md, "Serialized wgmma");
//   C7507: a setmaxnreg ignored ("to maintain minimum register requirements"): the compute
//          warps of a TMA ring keep the block's even share of registers and spill.
// The results stay right either way, so every compile is checked and a hit is logged as a
// warning; the compile tests fail on it.
bool ptxas_performance_loss(const CompiledKernel& compiled);

class NvrtcCompiler {
 public:
  explicit NvrtcCompiler(std::optional<std::string> dump_dir = std::nullopt);

  // "MAJOR.MINOR" of the NVRTC library loaded in this process.
  static std::string version();
  // version(), the file the library resolves to and its size ("13.0 libnvrtc.so.13 (109338064
  // bytes)"), which tell patch releases apart: part of every cache key, since their compilers
  // may emit other code.
  static std::string identity();
  // Targets this NVRTC can build CUBINs for that shardjit's kernels run on (sm_80 and newer: they
  // use bf16 mma.sync and cp.async): "sm_80", ..., "sm_90", "sm_90a", ...
  static std::vector<std::string> supported_archs();
  // Throws Error(kInvalidArgument) naming the supported targets when `arch` is not one of them.
  static void check_arch(const std::string& arch);
  // The canonical option list for `arch` (part of every cache key).
  static std::vector<std::string> compile_options(const std::string& arch);

  CompiledKernel compile(const KernelSource& source, const std::string& arch) const;

 private:
  void dump(const KernelSource& source, const std::string& arch, const std::string& ptx,
            const CompiledKernel* compiled, const std::string& log) const;
  // The dump folder's files of `source` for `arch`, without their extension.
  std::string dump_path(const KernelSource& source, const std::string& arch) const;
  std::optional<std::string> dump_dir_;
};

}  // namespace shardjit
