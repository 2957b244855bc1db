// Runtime (the kernel cache and compiler every op shares) and prewarm (compile a model's
// kernels into a cache folder ahead of time, as `shardjit prewarm` does).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"
#include "shardjit/prewarm.hpp"
#include "shardjit/runtime.hpp"
#include "tensor_views.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

template <typename T>
std::vector<DType> dtypes_arg(const char* what, const std::vector<T>& names) {
  std::vector<DType> out;
  for (const auto& name : names) out.push_back(parse_dtype_arg(what, name));
  return out;
}

}  // namespace

void bind_runtime(nb::module_& m) {
  m.def("version", [] { return std::string(version()); }, "The C++ library's version.");

  nb::class_<Runtime>(m, "Runtime",
                      "Kernel cache, compiler and loaded modules shared by every op. Each option left "
                      "None takes its value from the environment (SHARDJIT_*), then the default.")
      .def(
          "__init__",
          [](Runtime* self, std::optional<std::string> cache_dir, std::optional<bool> jit,
             std::optional<std::string> template_dir, std::optional<std::uint64_t> cache_max_bytes,
             std::optional<std::string> dump_dir, std::optional<std::string> log_level,
             std::optional<bool> hopper_path, std::optional<bool> autotune) {
            RuntimeOptions options;
            options.cache_dir = std::move(cache_dir);
            options.jit = jit;
            options.template_dir = std::move(template_dir);
            options.cache_max_bytes = cache_max_bytes;
            options.dump_dir = std::move(dump_dir);
            options.log_level = std::move(log_level);
            options.hopper_path = hopper_path;
            options.autotune = autotune;
            new (self) Runtime(options);
          },
          nb::kw_only(), nb::arg("cache_dir") = nb::none(), nb::arg("jit") = nb::none(),
          nb::arg("template_dir") = nb::none(), nb::arg("cache_max_bytes") = nb::none(),
          nb::arg("dump_dir") = nb::none(), nb::arg("log_level") = nb::none(),
          nb::arg("hopper_path") = nb::none(), nb::arg("autotune") = nb::none())
      .def_prop_ro("cache_dir", [](const Runtime& rt) { return rt.cache_dir(); })
      .def_prop_ro("jit_enabled", &Runtime::jit_enabled)
      .def(
          "cache_entries",
          [](Runtime& rt) {
            nb::list out;
            for (const DiskEntryInfo& entry : rt.impl().cache.disk().list()) {
              nb::dict row;
              row["key"] = entry.key;
              row["spec"] = entry.spec_text;
              row["arch"] = entry.arch;
              row["size_bytes"] = entry.size_bytes;
              out.append(row);
            }
            return out;
          },
          "The kernels in the disk cache: a list of dicts (key, spec, arch, size_bytes).");

  m.def(
      "prewarm",
      [](std::int64_t hidden, std::int64_t vocab, std::vector<std::string> archs, std::vector<int> tp,
         std::vector<std::string> dtypes, std::int64_t valid_vocab, std::vector<std::string> target_dtypes,
         std::vector<std::optional<std::string>> bias_dtypes, std::vector<bool> entropy, bool backward,
         bool dz_fp32, bool grad_filter, bool collectives, std::optional<std::string> cache_dir, int jobs,
         std::optional<bool> hopper_path) {
        // archs and jobs are checked by shardjit::prewarm (InvalidArgumentError, a ValueError).
        PrewarmConfig config;
        config.hidden = hidden;
        config.vocab = vocab;
        config.valid_vocab = valid_vocab;
        config.tp = std::move(tp);
        config.dtypes = dtypes_arg("dtypes", dtypes);
        config.archs = std::move(archs);
        config.target_dtypes = dtypes_arg("target_dtypes", target_dtypes);
        config.bias_dtypes.clear();
        for (const auto& name : bias_dtypes) {
          config.bias_dtypes.push_back(name ? std::optional<DType>(parse_dtype_arg("bias_dtypes", *name))
                                            : std::nullopt);
        }
        config.entropy = std::move(entropy);
        config.backward = backward;
        config.dz_fp32 = dz_fp32;
        config.grad_filter = grad_filter;
        config.collectives = collectives;
        config.jobs = jobs;
        PrewarmResult counts;
        {
          nb::gil_scoped_release release;
          RuntimeOptions options;
          options.cache_dir = std::move(cache_dir);
          options.jit = true;  // prewarm compiles whatever is missing
          options.hopper_path = hopper_path;  // the kernels the serving ops will load
          Runtime runtime(options);
          counts = prewarm(runtime, config);
        }
        nb::dict out;
        out["total"] = counts.total;
        out["compiled"] = counts.compiled;
        out["cached"] = counts.cached;
        out["failed"] = counts.failures.size();
        out["failures"] = counts.failures;
        out["missing"] = counts.missing;
        return out;
      },
      nb::arg("hidden"), nb::arg("vocab"), nb::kw_only(), nb::arg("archs"),
      nb::arg("tp") = std::vector<int>{1}, nb::arg("dtypes") = std::vector<std::string>{"bf16"},
      nb::arg("valid_vocab") = 0, nb::arg("target_dtypes") = std::vector<std::string>{"int64"},
      nb::arg("bias_dtypes") = std::vector<std::optional<std::string>>{std::nullopt},
      nb::arg("entropy") = std::vector<bool>{false}, nb::arg("backward") = false, nb::arg("dz_fp32") = false,
      nb::arg("grad_filter") = false, nb::arg("collectives") = false, nb::arg("cache_dir") = nb::none(),
      nb::arg("jobs") = 1,
      nb::arg("hopper_path") = nb::none(),
      "Compiles the LinearLogp kernels of a model (hidden, vocab) for each TP degree, dtype and arch "
      "into the cache (with backward, dz_fp32 and grad_filter: also those of ops with these options; "
      "with collectives: also ReduceScatter's and MoeCombine's for each degree of tp from 2 to 8); hopper_path "
      "(None: SHARDJIT_HOPPER_PATH) as the serving Runtime's. Returns a dict: total, compiled, cached, failed, "
      "failures (messages), missing (messages of kernels built or found but evicted again by the cache's size "
      "cap before the end: a cache-only server would not find them).");
}

}  // namespace shardjit::python
