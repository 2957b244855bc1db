#include "runtime/logging.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "shardjit/error.hpp"
#include "shardjit/logging.hpp"

namespace shardjit {
namespace {

LogLevel level_of(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return LogLevel::kTrace;
    case spdlog::level::debug: return LogLevel::kDebug;
    case spdlog::level::info: return LogLevel::kInfo;
    case spdlog::level::warn: return LogLevel::kWarn;
    case spdlog::level::err: return LogLevel::kError;
    default: return LogLevel::kCritical;
  }
}

// The logger's one sink: the program's handler where one is set (set_log_handler), else stderr.
// base_sink's mutex serializes the lines and the handler's replacement.
class HandlerOrStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void set_handler(LogHandler handler) {
    const std::lock_guard<std::mutex> lock(mutex_);
    handler_ = std::move(handler);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (handler_) {
      handler_(level_of(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } else {
      stderr_->log(msg);
    }
  }
  void flush_() override { stderr_->flush(); }

 private:
  LogHandler handler_;
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> stderr_ = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
};

const std::shared_ptr<HandlerOrStderrSink>& sink() {
  static const std::shared_ptr<HandlerOrStderrSink> instance = std::make_shared<HandlerOrStderrSink>();
  return instance;
}

}  // namespace

spdlog::logger& log() {
  // Registered once; spdlog keeps it alive. Kept out of headers so that there is one instance.
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("shardjit");
    if (existing) return existing;
    auto created = std::make_shared<spdlog::logger>("shardjit", sink());
    created->set_level(spdlog::level::warn);
    spdlog::register_logger(created);
    return created;
  }();
  return *logger;
}

void set_log_handler(LogHandler handler) {
  log();  // the logger and its sink exist before the first line
  sink()->set_handler(std::move(handler));
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
