// The library's log lines in Python's `logging` (logger "shardjit"), so that Python programs see
// and filter them like their own. A line can be logged on any thread, also a compile pool thread
// that a Python thread holding the GIL waits for, so the handler only queues it: one forwarding
// thread takes the GIL and hands the queued lines to `logging`.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "bindings.hpp"
#include "shardjit/logging.hpp"

namespace nb = nanobind;

namespace shardjit::python {
namespace {

// Lines queued while Python does not take them (the GIL held for long) beyond this are dropped,
// and their number is logged once forwarding resumes.
constexpr std::size_t kMaxQueuedLines = 10000;

int python_level(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
    case LogLevel::kDebug: return 10;  // logging.DEBUG
    case LogLevel::kInfo: return 20;
    case LogLevel::kWarn: return 30;
    case LogLevel::kError: return 40;
    case LogLevel::kCritical: return 50;
  }
  return 50;
}

struct Line {
  int level;
  std::string text;
};

// The thread starts with the first line, so that a process that logs nothing (or forks before
// it does) has no thread of ours.
class Forwarder {
 public:
  Forwarder() {
    set_log_handler([this](LogLevel level, std::string_view text) { push(python_level(level), std::string(text)); });
  }

  // Sends later lines to stderr again, forwards what is queued and ends the thread. Called with the
  // GIL held (atexit), which it releases while the thread finishes.
  void stop() {
    set_log_handler(nullptr);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_one();
    nb::gil_scoped_release release;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void push(int level, std::string text) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.size() >= kMaxQueuedLines) {
        ++dropped_;
        return;
      }
      queue_.push_back({level, std::move(text)});
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    }
    ready_.notify_one();
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      std::deque<Line> lines;
      lines.swap(queue_);
      const std::size_t dropped = std::exchange(dropped_, 0);
      lock.unlock();
      forward(lines, dropped);
      lock.lock();
    }
  }

  static void forward(const std::deque<Line>& lines, std::size_t dropped) {
    nb::gil_scoped_acquire gil;
    nb::object logger;
    try {
      logger = nb::module_::import_("logging").attr("getLogger")("shardjit");
      if (dropped > 0) {
        logger.attr("log")(30, "%d log lines were dropped while Python did not take them", dropped);
      }
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("shardjit's log forwarding");
      return;
    }
    for (const Line& line : lines) {
      try {
        // Bytes that are not UTF-8 (a path, a compiler's message) are replaced, not fatal.
        const nb::object text = nb::steal(
            PyUnicode_DecodeUTF8(line.text.data(), static_cast<Py_ssize_t>(line.text.size()), "replace"));
        if (!text.is_valid()) throw nb::python_error();
        logger.attr("log")(line.level, "%s", text);
      } catch (nb::python_error& e) {
        e.discard_as_unraisable("shardjit's log forwarding");
      } catch (const std::exception&) {
        // A line that cannot be handed over is lost rather than ending the process.
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Line> queue_;
  std::size_t dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

Forwarder* forwarder = nullptr;

}  // namespace

void bind_log_forwarding(nb::module_& m) {
  m.def(
      "_start_log_forwarding",
      [] {
        if (forwarder == nullptr) forwarder = new Forwarder();
      },
      "Hands the library's log lines to logging.getLogger('shardjit') (the package does this on import).");
  m.def(
      "_stop_log_forwarding",
      [] {
        // Taken before stop() releases the GIL, so that a second call finds nothing to stop.
        Forwarder* const stopping = std::exchange(forwarder, nullptr);
        if (stopping == nullptr) return;
        stopping->stop();
        delete stopping;
      },
      "Forwards the queued lines, ends the forwarding thread and sends later lines to stderr (at exit).");
  m.def(
      "_restart_log_forwarding_after_fork",
      [] {
        // The forking thread alone survives in the child: the old forwarder's thread and lock
        // are not there to stop or take, so it is left behind (a few bytes) and a new one starts.
        forwarder = new Forwarder();
      },
      "In a forked child: a new forwarding thread (os.register_at_fork).");
}

}  // namespace shardjit::python
