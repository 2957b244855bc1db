#include "runtime/compile/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <nvrtc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>

#include "runtime/compile/dump_folder.hpp"
#include "runtime/logging.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// A file only this process can have made (mkstemp: a new name, 0600), removed when done: where
// NVRTC may write what it is asked to write to a path.
class PrivateTempFile {
 public:
  PrivateTempFile() {
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    std::string pattern = (ec ? std::filesystem::path("/tmp") : dir).string() + "/shardjit-nvrtc-XXXXXX";
    const int fd = mkstemp(pattern.data());
    if (fd < 0) return;
    close(fd);
    path_ = pattern;
  }
  ~PrivateTempFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  PrivateTempFile(const PrivateTempFile&) = delete;
  PrivateTempFile& operator=(const PrivateTempFile&) = delete;

  bool valid() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string read() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

 private:
  std::string path_;
};

void check_nvrtc(nvrtcResult result, const char* call) {
  if (result == NVRTC_SUCCESS) return;
  throw Error(ErrorCode::kCompileFailed,
              std::string(call) + " failed: " + nvrtcGetErrorString(result));
}
#define SHARDJIT_NVRTC(call) check_nvrtc(call, #call)

struct ProgramDeleter {
  void operator()(nvrtcProgram* program) const {
    nvrtcDestroyProgram(program);
    delete program;
  }
};
using ProgramHandle = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

ProgramHandle create_program(const KernelSource& source) {
  ProgramHandle program(new nvrtcProgram{});
  nvrtcResult rc = nvrtcCreateProgram(program.get(), source.source.c_str(), "shardjit_kernel.cu",
                                      0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    delete program.release();
    check_nvrtc(rc, "nvrtcCreateProgram");
  }
  return program;
}

std::string program_log(nvrtcProgram program) {
  std::size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string text(size, '\0');
  nvrtcGetProgramLog(program, text.data());
  text.resize(size - 1);
  return text;
}

// Maps the "file(line)" positions in an NVRTC log back to the template lines, following the
// #line markers that TemplateSources::flatten writes.
std::string quote_offending_lines(const std::string& source, const std::string& nvrtc_log) {
  std::map<std::pair<std::string, int>, std::string> lines;
  static const std::regex marker(R"(^#line (\d+) \"([^\"]+)\"$)");
  std::istringstream in(source);
  std::string line, file = "shardjit_kernel.cu";
  int number = 0;
  while (std::getline(in, line)) {
    std::smatch match;
    if (std::regex_match(line, match, marker)) {
      number = std::stoi(match[1]) - 1;
      file = match[2];
      continue;
    }
    lines[{file, ++number}] = line;
  }
  static const std::regex position(R"(([A-Za-z0-9_./-]+)\((\d+)\): (error|warning))");
  std::string quoted;
  for (auto it = std::sregex_iterator(nvrtc_log.begin(), nvrtc_log.end(), position); it != std::sregex_iterator(); ++it) {
    auto found = lines.find({(*it)[1], std::stoi((*it)[2])});
    if (found == lines.end()) continue;
    quoted += "  " + found->first.first + ":" + std::to_string(found->first.second) + ": " +
              found->second + "\n";
  }
  return quoted;
}

std::string safe_file_name(const std::string& text) {
  std::string name;
  for (char c : text) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.size() > 180) name = name.substr(0, 180);
  return name;
}

}  // namespace

NvrtcCompiler::NvrtcCompiler(std::optional<std::string> dump_dir) : dump_dir_(std::move(dump_dir)) {}

std::string NvrtcCompiler::version() {
  int major = 0, minor = 0;
  SHARDJIT_NVRTC(nvrtcVersion(&major, &minor));
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string NvrtcCompiler::identity() {
  static const std::string id = [] {
    std::string text = version();
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) != 0 && info.dli_fname != nullptr) {
      // The file's size too: some packagings name the library by its major version only.
      std::error_code ec;
      std::filesystem::path real = std::filesystem::canonical(info.dli_fname, ec);
      if (ec) real = info.dli_fname;
      text += " " + real.filename().string();
      const std::uintmax_t bytes = std::filesystem::file_size(real, ec);
      if (!ec) text += " (" + std::to_string(bytes) + " bytes)";
    }
    return text;
  }();
  return id;
}

namespace {
// The oldest target the kernels run on (Ampere: bf16 mma.sync, cp.async).
constexpr int kOldestArch = 80;
}  // namespace

std::vector<std::string> NvrtcCompiler::supported_archs() {
  int count = 0;
  SHARDJIT_NVRTC(nvrtcGetNumSupportedArchs(&count));
  std::vector<int> numbers(static_cast<std::size_t>(count));
  SHARDJIT_NVRTC(nvrtcGetSupportedArchs(numbers.data()));
  std::vector<std::string> archs;
  for (int number : numbers) {
    if (number < kOldestArch) continue;
    archs.push_back("sm_" + std::to_string(number));
    // The arch-specific variants (wgmma and friends) exist from Hopper on.
    if (number >= 90) archs.push_back("sm_" + std::to_string(number) + "a");
  }
  return archs;
}

void NvrtcCompiler::check_arch(const std::string& arch) {
  std::vector<std::string> archs = supported_archs();
  if (std::find(archs.begin(), archs.end(), arch) != archs.end()) return;
  std::string known;
  for (const auto& a : archs) known += (known.empty() ? "" : ", ") + a;
  throw Error(ErrorCode::kInvalidArgument, "unknown or unsupported compile target '" + arch +
                                               "'; shardjit's kernels need sm_" + std::to_string(kOldestArch) +
                                               " or newer, and NVRTC " + version() + " builds: " + known);
}

std::vector<std::string> NvrtcCompiler::compile_options(const std::string& arch) {
  return {"-arch=" + arch, "-std=c++17", "-lineinfo"};
}

CompiledKernel NvrtcCompiler::compile(const KernelSource& source, const std::string& arch) const {
  check_arch(arch);
  ProgramHandle program = create_program(source);
  SHARDJIT_NVRTC(nvrtcAddNameExpression(*program, source.name_expression.c_str()));

  std::vector<std::string> options = compile_options(arch);
  // With a dump folder, NVRTC also writes its phase times (front end, NVVM, ptxas): what a compile
  // costs and where. Timing changes no code, so the key leaves it out. NVRTC writes them to a
  // fresh private file, never into the dump folder, whose files go through write_dump_file only.
  const bool dumping = dump_dir_ && dump_folder_usable(*dump_dir_);
  std::optional<PrivateTempFile> times;
  if (dumping) {
    times.emplace();
    if (times->valid()) options.push_back("--time=" + times->path());
  }
  std::vector<const char*> option_ptrs;
  for (const auto& option : options) option_ptrs.push_back(option.c_str());
  nvrtcResult rc = nvrtcCompileProgram(*program, static_cast<int>(option_ptrs.size()), option_ptrs.data());
  std::string nvrtc_log = program_log(*program);
  if (dumping && times->valid()) write_dump_file(*dump_dir_, dump_path(source, arch) + ".time.csv", times->read());

  if (rc != NVRTC_SUCCESS) {
    dump(source, arch, {}, nullptr, nvrtc_log);
    std::string message = "NVRTC could not compile " + source.spec_text + " for " + arch + " (" +
                          nvrtcGetErrorString(rc) + ")\n" + nvrtc_log;
    std::string quoted = quote_offending_lines(source.source, nvrtc_log);
    if (!quoted.empty()) message += "\noffending template lines:\n" + quoted;
    // The specialized source is what a bug report needs; it is kept only in a dump folder.
    const bool dumped = dump_dir_ && dump_folder_usable(*dump_dir_);
    message += dumped ? "\nspecialized source: " + dump_path(source, arch) + ".cu"
                      : "\nset SHARDJIT_DUMP_DIR to a folder to keep the specialized source";
    log().error("{}", message);
    throw Error(ErrorCode::kCompileFailed, message);
  }

  CompiledKernel compiled;
  compiled.spec_text = source.spec_text;
  compiled.arch = arch;
  compiled.log = nvrtc_log;
  const char* lowered = nullptr;
  SHARDJIT_NVRTC(nvrtcGetLoweredName(*program, source.name_expression.c_str(), &lowered));
  compiled.lowered_name = lowered;
  std::size_t cubin_size = 0;
  SHARDJIT_NVRTC(nvrtcGetCUBINSize(*program, &cubin_size));
  compiled.cubin.resize(cubin_size);
  SHARDJIT_NVRTC(nvrtcGetCUBIN(*program, compiled.cubin.data()));

  std::string ptx;
  if (dump_dir_) {
    std::size_t ptx_size = 0;
    if (nvrtcGetPTXSize(*program, &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
      ptx.resize(ptx_size);
      nvrtcGetPTX(*program, ptx.data());
      ptx.resize(ptx_size - 1);
    }
  }
  dump(source, arch, ptx, &compiled, nvrtc_log);
  if (!nvrtc_log.empty()) log().debug("NVRTC log for {} ({}):\n{}", source.spec_text, arch, nvrtc_log);
  if (ptxas_performance_loss(compiled)) {
    log().warn("{} ({}): ptxas reports a performance loss (wgmma run one at a time, or register limits "
               "ignored); the kernel is still correct. NVRTC log:\n{}",
               source.spec_text, arch, nvrtc_log);
  }
  return compiled;
}

void NvrtcCompiler::dump(const KernelSource& source, const std::string& arch, const std::string& ptx,
                         const CompiledKernel* compiled, const std::string& nvrtc_log) const {
  if (!dump_dir_ || !dump_folder_usable(*dump_dir_)) return;
  const std::string base = dump_path(source, arch);
  write_dump_file(*dump_dir_, base + ".cu", source.source);
  if (!nvrtc_log.empty()) write_dump_file(*dump_dir_, base + ".log", nvrtc_log);
  if (!ptx.empty()) write_dump_file(*dump_dir_, base + ".ptx", ptx);
  if (compiled != nullptr) write_dump_file(*dump_dir_, base + ".cubin", compiled->cubin);
}

std::string NvrtcCompiler::dump_path(const KernelSource& source, const std::string& arch) const {
  return (std::filesystem::path(*dump_dir_) / (safe_file_name(source.spec_text) + "." + arch)).string();
}

bool ptxas_performance_loss(const CompiledKernel& compiled) {
  return compiled.log.find("Potential Performance Loss") != std::string::npos;
}

}  // namespace shardjit
