// Where the library's log lines go.
//
// The library logs through one logger named "shardjit" whose level comes from
// SHARDJIT_LOG_LEVEL or RuntimeOptions::log_level (default warn). Its lines go to stderr unless a
// handler is set: a program that has its own logging (an inference server, the Python module,
// which hands them to Python's `logging`) takes them with set_log_handler.
#pragma once

#include <functional>
#include <string_view>

namespace shardjit {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kCritical };

// Called with each line at or above the logger's level: its level and its text (without time,
// logger name or level). It runs on whichever thread logged, one line at a time (calls never
// overlap), possibly while that thread holds the library's locks: it must return promptly,
// must not throw, and must not call into the library.
using LogHandler = std::function<void(LogLevel level, std::string_view text)>;

// Sends every later line to `handler` instead of stderr; an empty handler sends them to stderr
// again. Thread-safe; a line being handled when it is replaced finishes first.
void set_log_handler(LogHandler handler);

}  // namespace shardjit
