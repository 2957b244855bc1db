// An environment variable set for a scope: the runtime reads its knobs from the environment when
// it is made, so tests set one around the making and put the environment back after.
#pragma once

#include <optional>
#include <string>

namespace shardjit::testing {

// Sets `name` to `value` until destroyed, then restores it: its former value, or unset.
class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> before_;
};

}  // namespace shardjit::testing
