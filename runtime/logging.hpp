// The library's logger: spdlog, named "shardjit", level from SHARDJIT_LOG_LEVEL (see env.hpp).
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/spdlog.h>

namespace shardjit {

// The process-wide "shardjit" logger, created on first use; its lines go to stderr or to the
// program's handler (shardjit/logging.hpp).
spdlog::logger& log();

// Whether `name` is a level: trace, debug, info, warn, error, critical or off.
bool is_log_level(std::string_view name);

// Sets the logger's level from a name ("trace" ... "off"); throws on an unknown name.
void set_log_level(std::string_view level);

}  // namespace shardjit
