#include "runtime/logging.hpp"

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <pthread.h>

#include <spdlog/sinks/sink.h>
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

// The logger's sink: the program's handler where one is set (set_log_handler), else stderr
// (unless the program registered its own "shardjit" logger, whose sinks then print). Its own
// mutex serializes the handler's calls and its replacement; a line logged from inside the handler
// goes to stderr instead of waiting for that mutex on the same thread.
class HandlerOrStderrSink final : public spdlog::sinks::sink {
 public:
  HandlerOrStderrSink() {
    // A child forked while another thread holds the mutex would find it locked forever.
    pthread_atfork([] { sink()->mutex_.lock(); }, [] { sink()->mutex_.unlock(); }, [] { sink()->mutex_.unlock(); });
  }

  void log(const spdlog::details::log_msg& msg) override {
    if (in_handler) {
      stderr_->log(msg);
      return;
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!handler_) {
      if (stderr_fallback_) stderr_->log(msg);
      return;
    }
    in_handler = true;
    try {
      handler_(level_of(msg.level), std::string_view(msg.payload.data(), msg.payload.size()));
    } catch (...) {
      // A handler must not throw (shardjit/logging.hpp); the line is lost, the library goes on.
    }
    in_handler = false;
  }
  void flush() override { stderr_->flush(); }
  void set_pattern(const std::string& pattern) override { stderr_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    stderr_->set_formatter(std::move(formatter));
  }

  void set_handler(LogHandler handler) {
    if (in_handler) {
      throw Error(ErrorCode::kInvalidArgument, "set_log_handler: called from inside the log handler");
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    handler_ = std::move(handler);
  }
  // Lines without a handler are dropped rather than printed: the program's own logger prints them.
  void print_nothing_without_handler() {
    const std::lock_guard<std::mutex> lock(mutex_);
    stderr_fallback_ = false;
  }

  static const std::shared_ptr<HandlerOrStderrSink>& sink() {
    static const std::shared_ptr<HandlerOrStderrSink> instance = std::make_shared<HandlerOrStderrSink>();
    return instance;
  }

 private:
  static thread_local bool in_handler;
  std::mutex mutex_;
  LogHandler handler_;
  bool stderr_fallback_ = true;
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> stderr_ = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
};

thread_local bool HandlerOrStderrSink::in_handler = false;

// A "shardjit" logger the program registered: its sinks stay and print; ours joins them for a
// handler.
std::shared_ptr<spdlog::logger> join_programs_logger(std::shared_ptr<spdlog::logger> existing) {
  HandlerOrStderrSink::sink()->print_nothing_without_handler();
  existing->sinks().push_back(HandlerOrStderrSink::sink());
  return existing;
}

// The "shardjit" logger: ours, or the one the program registered before the library's first line.
std::shared_ptr<spdlog::logger> make_logger() {
  if (auto existing = spdlog::get("shardjit")) return join_programs_logger(std::move(existing));
  auto created = std::make_shared<spdlog::logger>("shardjit", HandlerOrStderrSink::sink());
  try {
    spdlog::initialize_logger(created);  // the program's spdlog pattern and error handler apply
  } catch (const spdlog::spdlog_ex&) {  // registered by another thread meanwhile
    if (auto existing = spdlog::get("shardjit")) return join_programs_logger(std::move(existing));
    throw;
  }
  created->set_level(spdlog::level::warn);
  return created;
}

}  // namespace

spdlog::logger& log() {
  // Made once; spdlog's registry keeps it alive. Kept out of headers so that there is one instance.
  static const std::shared_ptr<spdlog::logger> logger = make_logger();
  return *logger;
}

void set_log_handler(LogHandler handler) {
  log();  // the logger and its sink exist before the first line
  HandlerOrStderrSink::sink()->set_handler(std::move(handler));
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
