// The kernel templates built into the library (generated from templates/ by CMake).
#pragma once

#include <span>
#include <string_view>

namespace shardjit {

struct EmbeddedTemplate {
  const char* path;       // relative to templates/, e.g. "linear_logp/fwd.cuh"
  std::string_view text;
};

std::span<const EmbeddedTemplate> embedded_templates();

}  // namespace shardjit
