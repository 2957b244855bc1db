// Runtime (the kernel cache and compiler every op shares) and prewarm (compile a model's
// kernels into a cache folder ahead of time, as `shardjit prewarm` does).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "runtime/ops/prewarm_plan.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"
#include "shardjit/runtime.hpp"
#include "tensor_views.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

struct PrewarmCounts {
  std::size_t total = 0;
  std::size_t compiled = 0;
  std::size_t cached = 0;
  std::vector<std::string> failures;  // "<spec> <arch>: <message>"
};

// Builds every item on `jobs` threads; a kernel that fails is recorded, not thrown.
PrewarmCounts build_items(KernelCache& cache, const std::vector<PrewarmItem>& items, int jobs) {
  PrewarmCounts counts;
  counts.total = items.size();
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  auto worker = [&] {
    for (std::size_t i = next.fetch_add(1); i < items.size(); i = next.fetch_add(1)) {
      const PrewarmItem& item = items[i];
      std::string error;
      bool compiled = false;
      try {
        compiled = cache.get(item.spec, item.arch, "shardjit.prewarm").origin == KernelOrigin::kCompiled;
      } catch (const std::exception& caught) {
        error = caught.what();
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (!error.empty()) {
        counts.failures.push_back(item.spec.canonical_text() + " " + item.arch + ": " + error);
      } else if (compiled) {
        ++counts.compiled;
      } else {
        ++counts.cached;
      }
    }
  };
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(std::max(jobs, 1)), items.size());
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  return counts;
}

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
         std::optional<std::string> cache_dir, int jobs, std::optional<bool> hopper_path) {
        if (archs.empty()) throw nb::value_error("archs: give at least one target arch, e.g. ['sm_90']");
        if (jobs < 1) throw nb::value_error("jobs: expected a whole number >= 1");
        PrewarmRequest request;
        request.models = {ModelShape{"prewarm", hidden, vocab, valid_vocab}};
        request.tp = std::move(tp);
        request.dtypes = dtypes_arg("dtypes", dtypes);
        request.archs = std::move(archs);
        request.target_dtypes = dtypes_arg("target_dtypes", target_dtypes);
        request.bias_dtypes.clear();
        for (const auto& name : bias_dtypes) {
          request.bias_dtypes.push_back(name ? std::optional<DType>(parse_dtype_arg("bias_dtypes", *name))
                                             : std::nullopt);
        }
        request.entropy = std::move(entropy);
        request.backward = backward;
        PrewarmCounts counts;
        {
          nb::gil_scoped_release release;
          RuntimeOptions options;
          options.cache_dir = std::move(cache_dir);
          options.jit = true;  // prewarm compiles whatever is missing
          options.hopper_path = hopper_path;
          Runtime runtime(options);
          // The kernels the ops will load: the same Hopper setting (argument, else SHARDJIT_HOPPER_PATH).
          request.hopper_path = runtime.impl().config.hopper_path;
          counts = build_items(runtime.impl().cache, prewarm_items(request), jobs);
        }
        nb::dict out;
        out["total"] = counts.total;
        out["compiled"] = counts.compiled;
        out["cached"] = counts.cached;
        out["failed"] = counts.failures.size();
        out["failures"] = counts.failures;
        return out;
      },
      nb::arg("hidden"), nb::arg("vocab"), nb::kw_only(), nb::arg("archs"),
      nb::arg("tp") = std::vector<int>{1}, nb::arg("dtypes") = std::vector<std::string>{"bf16"},
      nb::arg("valid_vocab") = 0, nb::arg("target_dtypes") = std::vector<std::string>{"int64"},
      nb::arg("bias_dtypes") = std::vector<std::optional<std::string>>{std::nullopt},
      nb::arg("entropy") = std::vector<bool>{false}, nb::arg("backward") = false,
      nb::arg("cache_dir") = nb::none(), nb::arg("jobs") = 1, nb::arg("hopper_path") = nb::none(),
      "Compiles the LinearLogp kernels of a model (hidden, vocab) for each TP degree, dtype and arch "
      "into the cache; hopper_path (None: SHARDJIT_HOPPER_PATH) as the serving Runtime's. Returns a "
      "dict: total, compiled, cached, failed, failures (messages).");
}

}  // namespace shardjit::python
