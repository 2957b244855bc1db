#include "tools/cli/progress.hpp"

#include <unistd.h>

namespace shardjit::cli {

Progress::Progress(std::size_t total, std::FILE* stream)
    : stream_(stream), terminal_(::isatty(::fileno(stream)) == 1), total_(total) {}

void Progress::finished(const char* verb, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++done_;
  if (terminal_) {
    // "\033[K" clears what is left of a longer previous line.
    std::fprintf(stream_, "\r[%zu/%zu] %s %s\033[K", done_, total_, verb, what.c_str());
    line_open_ = true;
  } else {
    std::fprintf(stream_, "[%zu/%zu] %s %s\n", done_, total_, verb, what.c_str());
  }
  std::fflush(stream_);
}

void Progress::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!line_open_) return;
  std::fputc('\n', stream_);
  std::fflush(stream_);
  line_open_ = false;
}

}  // namespace shardjit::cli
