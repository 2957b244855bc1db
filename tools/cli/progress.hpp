// The live progress of a prewarm on stderr. On a terminal one line is rewritten in place
// ("\r[12/64] compiled ..."); into a file or a pipe (CI logs, tests) each finished kernel gets a
// line of its own, since carriage returns make such logs unreadable.
#pragma once

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>

namespace shardjit::cli {

class Progress {
 public:
  Progress(std::size_t total, std::FILE* stream);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // One kernel is done: `verb` is "compiled", "cached" or "failed". Thread-safe.
  void finished(const char* verb, const std::string& what);

  // Ends the line a terminal was rewriting, so that what follows starts on a fresh one.
  void close();

 private:
  std::mutex mutex_;
  std::FILE* stream_;
  bool terminal_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool line_open_ = false;
};

}  // namespace shardjit::cli
