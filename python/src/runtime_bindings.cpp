// Runtime (the kernel cache and compiler every op shares) and prewarm (compile a model's
// kernels into a cache folder ahead of time, as `shardjit prewarm` does).
#include <cstdint>
#include <limits>
#include <utility>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "runtime/env.hpp"
#include "runtime/runtime_impl.hpp"
#include "shardjit/error.hpp"
#include "shardjit/prewarm.hpp"
#include "shardjit/runtime.hpp"
#include "tensor_views.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

// Keyword arguments arrive as Python objects and are checked here by name, so that a wrong one
// is a TypeError or ValueError naming it rather than nanobind's "incompatible function arguments".

std::string python_type_name(nb::handle value) { return nb::cast<std::string>(nb::str(value.type().attr("__name__"))); }

[[noreturn]] void wrong_type(const char* name, const std::string& expected, nb::handle value) {
  throw nb::type_error((std::string(name) + ": expected " + expected + ", got " + python_type_name(value)).c_str());
}

bool flag(const char* name, nb::handle value) {
  if (!nb::isinstance<nb::bool_>(value)) wrong_type(name, "True or False", value);
  return nb::cast<bool>(value);
}

std::optional<bool> optional_flag(const char* name, nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::bool_>(value)) wrong_type(name, "True, False or None", value);
  return nb::cast<bool>(value);
}

// A whole number from `low` to `high`; True and False are not numbers here.
template <typename T>
T integer(const char* name, nb::handle value, T low, T high) {
  if (nb::isinstance<nb::bool_>(value) || !nb::isinstance<nb::int_>(value)) wrong_type(name, "an int", value);
  const std::string range = " from " + std::to_string(low) + " to " + std::to_string(high);
  T number{};
  try {
    number = nb::cast<T>(value);
  } catch (const nb::cast_error&) {
    throw nb::value_error((std::string(name) + ": " + nb::cast<std::string>(nb::str(value)) +
                           " is out of range; expected a whole number" + range)
                              .c_str());
  }
  if (number < low || number > high) {
    throw nb::value_error(
        (std::string(name) + ": " + std::to_string(number) + " is out of range; expected a whole number" + range)
            .c_str());
  }
  return number;
}

// A path: str or os.PathLike (None: not given). NUL bytes are the runtime's to refuse.
std::optional<std::string> optional_path(const char* name, nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::str>(value) && !nb::hasattr(value, "__fspath__")) {
    wrong_type(name, "a path (str or os.PathLike) or None", value);
  }
  nb::object text = nb::module_::import_("os").attr("fspath")(value);
  if (!nb::isinstance<nb::str>(text)) wrong_type(name, "a path given as str", text);
  return nb::cast<std::string>(text);
}

std::optional<std::string> optional_text(const char* name, nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (!nb::isinstance<nb::str>(value)) wrong_type(name, "a str or None", value);
  return nb::cast<std::string>(value);
}

// The items of a list or tuple argument, each converted by `item`. A str is refused: it is a
// sequence of characters, and archs="sm_80" would otherwise be read as five archs.
template <typename T, typename Item>
std::vector<T> list_of(const char* name, const char* expected, nb::handle value, Item item) {
  if (!nb::isinstance<nb::list>(value) && !nb::isinstance<nb::tuple>(value)) wrong_type(name, expected, value);
  std::vector<T> out;
  for (nb::handle element : value) out.push_back(item(element));
  return out;
}

std::vector<std::string> names(const char* name, const char* expected, nb::handle value) {
  return list_of<std::string>(name, expected, value, [&](nb::handle element) {
    if (!nb::isinstance<nb::str>(element)) wrong_type(name, std::string(expected) + " (each a str)", element);
    return nb::cast<std::string>(element);
  });
}

std::vector<DType> dtypes_arg(const char* name, nb::handle value) {
  std::vector<DType> out;
  for (const std::string& text : names(name, "a list of dtype names such as ['bf16']", value)) {
    out.push_back(parse_dtype_arg(name, text));
  }
  return out;
}

RuntimeOptions runtime_options(nb::handle cache_dir, nb::handle jit, nb::handle template_dir,
                               nb::handle cache_max_bytes, nb::handle dump_dir, nb::handle log_level,
                               nb::handle hopper_path, nb::handle autotune, nb::handle compile_jobs) {
  RuntimeOptions options;
  options.cache_dir = optional_path("cache_dir", cache_dir);
  options.jit = optional_flag("jit", jit);
  options.template_dir = optional_path("template_dir", template_dir);
  if (!cache_max_bytes.is_none()) {
    options.cache_max_bytes =
        integer<std::uint64_t>("cache_max_bytes", cache_max_bytes, 0, std::numeric_limits<std::uint64_t>::max());
  }
  options.dump_dir = optional_path("dump_dir", dump_dir);
  options.log_level = optional_text("log_level", log_level);
  options.hopper_path = optional_flag("hopper_path", hopper_path);
  options.autotune = optional_flag("autotune", autotune);
  if (!compile_jobs.is_none()) {
    options.compile_jobs = integer<int>("compile_jobs", compile_jobs, 0, kMaxCompileJobs);
  }
  return options;
}

// prewarm's arguments as given (all but cache_dir and hopper_path, which go to its Runtime).
struct PrewarmArgs {
  nb::object hidden, vocab, archs, tp, dtypes, valid_vocab, target_dtypes, bias_dtypes, entropy, backward, dz_fp32,
      grad_filter, collectives, jobs;
};

PrewarmConfig prewarm_config(const PrewarmArgs& a) {
  // The ranges here are the C++ types'; the values' own limits are shardjit::prewarm's to check.
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  constexpr int kIntMin = std::numeric_limits<int>::min();
  constexpr int kIntMax = std::numeric_limits<int>::max();
  PrewarmConfig config;
  config.hidden = integer<std::int64_t>("hidden", a.hidden, kMin, kMax);
  config.vocab = integer<std::int64_t>("vocab", a.vocab, kMin, kMax);
  config.archs = names("archs", "a list of arch names such as ['sm_80']", a.archs);
  config.tp = list_of<int>("tp", "a list of TP degrees such as [1, 2]", a.tp,
                           [](nb::handle degree) { return integer<int>("tp", degree, kIntMin, kIntMax); });
  config.dtypes = dtypes_arg("dtypes", a.dtypes);
  config.valid_vocab = integer<std::int64_t>("valid_vocab", a.valid_vocab, kMin, kMax);
  config.target_dtypes = dtypes_arg("target_dtypes", a.target_dtypes);
  config.bias_dtypes = list_of<std::optional<DType>>(
      "bias_dtypes", "a list of dtype names or None such as [None, 'bf16']", a.bias_dtypes,
      [](nb::handle name) -> std::optional<DType> {
        if (name.is_none()) return std::nullopt;
        if (!nb::isinstance<nb::str>(name)) wrong_type("bias_dtypes", "dtype names or None", name);
        return parse_dtype_arg("bias_dtypes", nb::cast<std::string>(name));
      });
  config.entropy = list_of<bool>("entropy", "a list of bools such as [False, True]", a.entropy,
                                 [](nb::handle on) { return flag("entropy", on); });
  config.backward = flag("backward", a.backward);
  config.dz_fp32 = flag("dz_fp32", a.dz_fp32);
  config.grad_filter = flag("grad_filter", a.grad_filter);
  config.collectives = flag("collectives", a.collectives);
  config.jobs = integer<int>("jobs", a.jobs, kIntMin, kIntMax);
  return config;
}

nb::dict prewarm_counts(const PrewarmResult& counts) {
  nb::dict out;
  out["total"] = counts.total;
  out["compiled"] = counts.compiled;
  out["cached"] = counts.cached;
  out["prebuilt"] = counts.prebuilt;
  out["failed"] = counts.failures.size();
  out["failures"] = counts.failures;
  out["missing"] = counts.missing;
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
          [](Runtime* self, nb::object cache_dir, nb::object jit, nb::object template_dir, nb::object cache_max_bytes,
             nb::object dump_dir, nb::object log_level, nb::object hopper_path, nb::object autotune,
             nb::object compile_jobs) {
            const RuntimeOptions options = runtime_options(cache_dir, jit, template_dir, cache_max_bytes, dump_dir,
                                                           log_level, hopper_path, autotune, compile_jobs);
            new (self) Runtime(options);
          },
          nb::kw_only(), nb::arg("cache_dir").none() = nb::none(), nb::arg("jit").none() = nb::none(),
          nb::arg("template_dir").none() = nb::none(), nb::arg("cache_max_bytes").none() = nb::none(),
          nb::arg("dump_dir").none() = nb::none(), nb::arg("log_level").none() = nb::none(),
          nb::arg("hopper_path").none() = nb::none(), nb::arg("autotune").none() = nb::none(),
          nb::arg("compile_jobs").none() = nb::none())
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
      [](nb::object hidden, nb::object vocab, nb::object archs, nb::object tp, nb::object dtypes,
         nb::object valid_vocab, nb::object target_dtypes, nb::object bias_dtypes, nb::object entropy,
         nb::object backward, nb::object dz_fp32, nb::object grad_filter, nb::object collectives,
         nb::object cache_dir, nb::object jobs, nb::object hopper_path) {
        // Types are checked here, by name; the values by shardjit::prewarm (InvalidArgumentError,
        // a ValueError), what it can check without a Runtime before the cache folder is made.
        const PrewarmConfig config =
            prewarm_config({hidden, vocab, archs, tp, dtypes, valid_vocab, target_dtypes, bias_dtypes, entropy,
                            backward, dz_fp32, grad_filter, collectives, jobs});
        check_prewarm_config(config);
        RuntimeOptions options;
        options.cache_dir = optional_path("cache_dir", cache_dir);
        options.jit = true;                                               // prewarm compiles whatever is missing
        options.hopper_path = optional_flag("hopper_path", hopper_path);  // the kernels the serving ops load
        PrewarmResult counts;
        {
          nb::gil_scoped_release release;
          Runtime runtime(options);
          counts = prewarm(runtime, config);
        }
        return prewarm_counts(counts);
      },
      nb::arg("hidden").none(), nb::arg("vocab").none(), nb::kw_only(), nb::arg("archs").none(),
      nb::arg("tp").none() = std::vector<int>{1}, nb::arg("dtypes").none() = std::vector<std::string>{"bf16"},
      nb::arg("valid_vocab").none() = 0, nb::arg("target_dtypes").none() = std::vector<std::string>{"int64"},
      nb::arg("bias_dtypes").none() = std::vector<std::optional<std::string>>{std::nullopt},
      nb::arg("entropy").none() = std::vector<bool>{false}, nb::arg("backward").none() = false,
      nb::arg("dz_fp32").none() = false, nb::arg("grad_filter").none() = false,
      nb::arg("collectives").none() = false, nb::arg("cache_dir").none() = nb::none(),
      nb::arg("jobs").none() = 0, nb::arg("hopper_path").none() = nb::none(),
      "Compiles the LinearLogp kernels of a model (hidden, vocab) for each TP degree, dtype and arch "
      "into the cache (with backward, dz_fp32 and grad_filter: also those of ops with these options; "
      "with collectives: also ReduceScatter's and MoeCombine's for each degree of tp up to 8, MoeCombine's "
      "only at 1); hopper_path "
      "(None: SHARDJIT_HOPPER_PATH) as the serving Runtime's; jobs: kernels compiled at once (0: one per hardware "
      "thread, as the CLI). Returns a dict: total, compiled, prebuilt (built with the library, copied into the cache), cached, failed, "
      "failures (messages), missing (messages of kernels built or found but not in the cache folder at the end, "
      "with the reason: a cache-only server would not find them). A wrong argument is a TypeError or ValueError "
      "naming it.");
}

}  // namespace shardjit::python
