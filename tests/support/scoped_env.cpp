#include "support/scoped_env.hpp"

#include <cstdlib>

namespace shardjit::testing {

ScopedEnv::ScopedEnv(const std::string& name, const std::string& value) : name_(name) {
  if (const char* before = std::getenv(name_.c_str())) before_ = before;
  ::setenv(name_.c_str(), value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (before_) {
    ::setenv(name_.c_str(), before_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

}  // namespace shardjit::testing
