// shardjit-prebuild: writes the table of kernels compiled with the library
// (runtime/cache/prebuilt_kernels.hpp), run by the build (cmake/prebuilt_kernels.cmake), never
// installed. The kernels are those a LinearLogp op asks for whatever its shape: the ones that
// two different model shapes' prewarms share (on the Hopper loop the forward, the dZ kernel and
// the kept chunk's three; the backward's GEMMs, scale, bias and combine kernels; ReduceScatter's
// kernel), for every TP degree (1, 2, 4, 8), target and bias type, entropy setting and backward
// variant but the experimental ones (dz_fp32, gradient filters), for each dtype and arch given.
//
//   shardjit-prebuild --out FILE.cpp --cache-dir DIR --archs sm_90a[,ARCH...] --dtypes bf16[,fp16...] [--jobs N]
//
// They are compiled through a kernel cache over DIR (a folder of the build tree), so a rebuild
// compiles only the kernels whose templates changed. The CUBINs are written to FILE.cpp.d/ and
// FILE.cpp pulls them in with .incbin; FILE.cpp is rewritten only when its text changes, so that
// an unchanged table does not relink the library.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/cache/kernel_cache.hpp"
#include "runtime/cache/prebuilt_kernels.hpp"
#include "runtime/prewarm/plan.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

// The generator runs before any table exists: its own cache starts with none.
std::span<const PrebuiltKernel> prebuilt_kernel_table() { return {}; }

namespace {

struct Options {
  std::filesystem::path out;
  std::string cache_dir;
  std::vector<std::string> archs;
  std::vector<DType> dtypes;
  int jobs = 0;
};

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, ',');) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw Error(ErrorCode::kInvalidArgument, flag + ": expected a value after it");
    const std::string value = argv[++i];
    if (flag == "--out") {
      options.out = value;
    } else if (flag == "--cache-dir") {
      options.cache_dir = value;
    } else if (flag == "--archs") {
      options.archs = split_commas(value);
    } else if (flag == "--dtypes") {
      for (const std::string& name : split_commas(value)) {
        const std::optional<DType> dtype = parse_dtype(name);
        if (!dtype) throw Error(ErrorCode::kInvalidArgument, "--dtypes: expected bf16, fp16 or fp32, got " + name);
        options.dtypes.push_back(*dtype);
      }
    } else if (flag == "--jobs") {
      options.jobs = std::stoi(value);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "unknown option " + flag + "; expected --out, --cache-dir, --archs, --dtypes or --jobs");
    }
  }
  if (options.out.empty() || options.cache_dir.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "expected --out FILE.cpp and --cache-dir DIR");
  }
  return options;
}

// A prewarm of every option an op's shape-independent kernels depend on, for one model shape.
std::vector<PrewarmItem> items_of(const Options& options, std::int64_t hidden, std::int64_t vocab) {
  PrewarmRequest request;
  request.models = {ModelShape{"prebuild", hidden, vocab, 0}};
  request.tp = {1, 2, 4, 8};
  request.dtypes = options.dtypes;
  request.archs = options.archs;
  request.target_dtypes = {DType::kInt64, DType::kInt32};
  request.bias_dtypes = {std::nullopt};
  for (DType dtype : options.dtypes) request.bias_dtypes.push_back(dtype);
  request.entropy = {false, true};
  request.backward = true;
  // ReduceScatter's kernel, whose only shape is its vector width (16 bytes where H's rows are a
  // multiple of 16 bytes, as at both shapes); MoeCombine's is the hidden size's.
  request.collectives = true;
  return prewarm_items(request);
}

// The items whose kernels no shape changes: those of two unrelated model shapes' prewarms.
std::vector<PrewarmItem> shape_independent_items(const Options& options) {
  const std::vector<PrewarmItem> first = items_of(options, 4096, 128256);
  std::set<std::string> second;
  for (const PrewarmItem& item : items_of(options, 2880, 201088)) second.insert(item.name());
  std::vector<PrewarmItem> shared;
  for (const PrewarmItem& item : first) {
    if (second.count(item.name()) != 0) shared.push_back(item);
  }
  return shared;
}

// `text` as a C++ string literal.
std::string c_string(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '\n') {
      quoted += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "\"";
}

void write_if_changed(const std::filesystem::path& path, const std::string& text) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream old;
  old << in.rdbuf();
  if (in && old.str() == text) return;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw Error(ErrorCode::kInternal, "cannot write " + path.string());
}

// The CUBIN of each kernel into `folder` (by key) and the table's source text.
std::string table_source(KernelCache& cache, const std::vector<PrewarmItem>& items,
                         const std::vector<CachedKernel>& kernels, const std::filesystem::path& folder) {
  std::ostringstream assembly;
  std::ostringstream table;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string key = cache.key(items[i].spec, items[i].arch);
    const CompiledKernel& kernel = *kernels[i].kernel;
    const std::filesystem::path cubin = folder / (key + ".cubin");
    write_if_changed(cubin, kernel.cubin);
    const std::string symbol = "shardjit_prebuilt_" + std::to_string(i);
    // Hidden global symbols: the table below refers to them, nothing outside the library does.
    const std::string lines[] = {".globl " + symbol, ".hidden " + symbol, ".balign 16", symbol + ":",
                                 ".incbin " + c_string(cubin.string())};
    for (const std::string& line : lines) {
      assembly << "  " << c_string(line + "\n") << "\n";
    }
    table << "    {" << c_string(key) << ", " << c_string(kernel.spec_text) << ", " << c_string(kernel.arch) << ", "
          << c_string(kernel.lowered_name) << ", " << symbol << ", " << kernel.cubin.size() << "},\n";
  }
  std::ostringstream out;
  out << "// Generated by shardjit-prebuild (tools/prebuild); do not edit.\n"
      << "#include \"runtime/cache/prebuilt_kernels.hpp\"\n\n"
      << "__asm__(\n  \".section .rodata\\n\"\n" << assembly.str() << "  \".previous\\n\");\n\n";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out << "extern \"C\" __attribute__((visibility(\"hidden\"))) const unsigned char shardjit_prebuilt_" << i
        << "[];\n";
  }
  out << "\nnamespace shardjit {\n\n"
      << "std::span<const PrebuiltKernel> prebuilt_kernel_table() {\n"
      << "  static const PrebuiltKernel table[] = {\n"
      << table.str();
  if (items.empty()) out << "    {nullptr, nullptr, nullptr, nullptr, nullptr, 0},\n";
  out << "  };\n"
      << "  return std::span<const PrebuiltKernel>(table, " << items.size() << ");\n"
      << "}\n\n}  // namespace shardjit\n";
  return out.str();
}

// Removes the CUBINs of `folder` that the table no longer names (their kernels' templates
// changed): the folder holds one file a kernel of the current table, not one a build.
void remove_stale_cubins(const std::filesystem::path& folder, const std::set<std::string>& current) {
  for (const auto& file : std::filesystem::directory_iterator(folder)) {
    if (file.path().extension() == ".cubin" && current.count(file.path().filename().string()) == 0) {
      std::filesystem::remove(file.path());
    }
  }
}

int run(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  std::vector<PrewarmItem> items;
  if (!options.archs.empty() && !options.dtypes.empty()) items = shape_independent_items(options);

  RuntimeConfig config;
  config.cache_dir = options.cache_dir;
  config.cache_max_bytes = std::uint64_t{1} << 32;
  config.compile_jobs = options.jobs;
  KernelCache cache(config);
  std::map<std::string, std::vector<std::size_t>> by_arch;
  for (std::size_t i = 0; i < items.size(); ++i) by_arch[items[i].arch].push_back(i);
  std::vector<CachedKernel> kernels(items.size());
  for (const auto& [arch, indices] : by_arch) {
    std::vector<KernelSpec> of_arch;
    for (std::size_t i : indices) of_arch.push_back(items[i].spec);
    const std::vector<CachedKernel> built = cache.get_all(of_arch, arch, "shardjit-prebuild");
    for (std::size_t j = 0; j < indices.size(); ++j) kernels[indices[j]] = built[j];
  }

  const std::filesystem::path folder = options.out.string() + ".d";
  std::filesystem::create_directories(folder);
  write_if_changed(options.out, table_source(cache, items, kernels, folder));
  std::set<std::string> current;
  for (const PrewarmItem& item : items) current.insert(cache.key(item.spec, item.arch) + ".cubin");
  remove_stale_cubins(folder, current);
  std::size_t bytes = 0;
  for (const CachedKernel& kernel : kernels) bytes += kernel.kernel->cubin.size();
  std::printf("shardjit-prebuild: %zu kernels, %.1f MB of CUBIN\n", items.size(), static_cast<double>(bytes) / 1e6);
  return 0;
}

}  // namespace
}  // namespace shardjit

int main(int argc, char** argv) {
  try {
    return shardjit::run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "shardjit-prebuild: %s\n", error.what());
    return 1;
  }
}
