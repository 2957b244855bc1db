// Uses the installed package the way an application would: a Runtime, and the error type for
// a bad op configuration (no GPU is needed for either).
#include <cstdio>

#include <shardjit/shardjit.hpp>

int main() {
  shardjit::Runtime runtime;
  shardjit::LinearLogpConfig config;
  config.hidden = 100;  // not a multiple of 8
  config.vocab_local = 1000;
  try {
    shardjit::LinearLogp op(runtime, config);
  } catch (const shardjit::Error& e) {
    if (e.code() != shardjit::ErrorCode::kInvalidArgument) return 1;
    std::printf("shardjit %s: %s\n", shardjit::version(), e.what());
    return 0;
  }
  return 1;
}
