// A Runtime made under one environment setting, for tests that run the same op under a knob of
// the environment table (SHARDJIT_FWD_TILE, SHARDJIT_FWD_MERGE, ...), which a runtime reads when
// it is made.
#pragma once

#include <string>

#include "shardjit/runtime.hpp"

namespace shardjit::testing {

// The runtime made while the environment variable `name` is `value`, one per setting for the
// whole test program; the variable is restored after. Never destroyed, so that no static its
// construction made first is gone before it.
Runtime& runtime_with(const std::string& name, const std::string& value);

}  // namespace shardjit::testing
