#include "support/runtime_with.hpp"

#include <map>
#include <memory>

#include "support/scoped_env.hpp"

namespace shardjit::testing {

Runtime& runtime_with(const std::string& name, const std::string& value) {
  static auto* const runtimes = new std::map<std::string, std::unique_ptr<Runtime>>();
  std::unique_ptr<Runtime>& runtime = (*runtimes)[name + "=" + value];
  if (!runtime) {
    const ScopedEnv setting(name, value);
    runtime = std::make_unique<Runtime>();
  }
  return *runtime;
}

}  // namespace shardjit::testing
