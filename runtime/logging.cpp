#include "runtime/logging.hpp"

#include <mutex>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "shardjit/error.hpp"

namespace shardjit {

spdlog::logger& log() {
  // Registered once; spdlog keeps it alive. Kept out of headers so that there is one instance.
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("shardjit");
    if (existing) return existing;
    auto created = spdlog::stderr_color_mt("shardjit");
    created->set_level(spdlog::level::warn);
    return created;
  }();
  return *logger;
}

bool is_log_level(std::string_view name) {
  // from_str maps unknown names to "off"; only accept "off" when it was asked for.
  return spdlog::level::from_str(std::string(name)) != spdlog::level::off || name == "off";
}

void set_log_level(std::string_view level) {
  if (!is_log_level(level)) {
    throw Error(ErrorCode::kInvalidArgument,
                "unknown log level '" + std::string(level) +
                    "'; expected trace, debug, info, warn, error, critical or off");
  }
  log().set_level(spdlog::level::from_str(std::string(level)));
}

}  // namespace shardjit
