#include "support/runtime_with.hpp"

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

namespace shardjit::testing {

Runtime& runtime_with(const std::string& name, const std::string& value) {
  static auto* const runtimes = new std::map<std::string, std::unique_ptr<Runtime>>();
  std::unique_ptr<Runtime>& runtime = (*runtimes)[name + "=" + value];
  if (!runtime) {
    const char* before = std::getenv(name.c_str());
    const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
    setenv(name.c_str(), value.c_str(), 1);
    runtime = std::make_unique<Runtime>();
    if (saved) {
      setenv(name.c_str(), saved->c_str(), 1);
    } else {
      unsetenv(name.c_str());
    }
  }
  return *runtime;
}

}  // namespace shardjit::testing
