// The library's logger: spdlog, named "shardjit", level from SHARDJIT_LOG_LEVEL (see env.hpp).
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

namespace shardjit {

// The process-wide "shardjit" logger (stderr), created on first use.
spdlog::logger& log();

// Sets the logger's level from a name ("trace" ... "off"); throws on an unknown name.
void set_log_level(std::string_view level);

}  // namespace shardjit
