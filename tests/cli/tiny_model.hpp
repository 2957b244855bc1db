// The model the cli tests prewarm: tests/cli/data/tiny.json (hidden 64, vocab 300, bf16), one
// arch and one option set, so that a full prewarm takes a second or two on a small machine.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/prewarm/plan.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {

inline constexpr const char* kTinyArch = "sm_80";

// `shardjit prewarm` arguments for the tiny model into `cache_dir`.
inline std::vector<std::string> tiny_prewarm_args(const std::filesystem::path& cache_dir) {
  return {"--cache-dir", cache_dir.string(), "prewarm", test_data("tiny.json").string(), "--arch", kTinyArch,
          "--jobs", "2", "--targets", "int64", "--entropy", "off"};
}

// How many kernels that prewarm builds, from the same plan the tool uses.
inline std::size_t tiny_kernel_count() {
  PrewarmRequest request;
  request.models = {ModelShape{"tiny", 64, 300, 0}};
  request.archs = {kTinyArch};
  return prewarm_items(request).size();
}

// "prewarm: N kernels: C compiled, 0 prebuilt, D already cached, F failed" (the tiny model's
// arch has no kernels built with the library).
inline std::string prewarm_summary(std::size_t total, std::size_t compiled, std::size_t cached, std::size_t failed) {
  return "prewarm: " + std::to_string(total) + " kernels: " + std::to_string(compiled) + " compiled, 0 prebuilt, " +
         std::to_string(cached) + " already cached, " + std::to_string(failed) + " failed";
}

}  // namespace shardjit::testing
