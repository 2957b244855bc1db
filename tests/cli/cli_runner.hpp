// Runs the built `shardjit` tool as a child process, the way users and scripts do, and captures
// its exit code, stdout and stderr. Header-only because the cli test folder builds its *_test.cpp
// files only.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cache/atomic_file.hpp"

extern char** environ;

namespace shardjit::testing {

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The built tool. SHARDJIT_CLI overrides; else it sits in tools/ of the build folder (the
// compile definition SHARDJIT_CLI_PATH is a fallback: it is derived from the library's folder).
inline std::filesystem::path cli_path() {
  if (const char* forced = std::getenv("SHARDJIT_CLI")) return forced;
  const std::filesystem::path candidates[] = {std::filesystem::path(SHARDJIT_BINARY_DIR) / "tools" / "shardjit",
                                              std::filesystem::path(SHARDJIT_CLI_PATH)};
  for (const auto& candidate : candidates) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  throw std::runtime_error("the shardjit tool was not found at " + candidates[0].string() +
                           "; build it first (cmake --build build) or set SHARDJIT_CLI");
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A started tool process; its output goes to files in `scratch` so that several may run at once
// without filling pipes.
class CliProcess {
 public:
  // `env` entries ("NAME=value") are added to this process's environment, from which every
  // SHARDJIT_* variable is removed first, so that the caller's settings cannot leak in.
  // `launcher` (a program and its arguments, such as setpriv's) runs the tool when given.
  CliProcess(const std::vector<std::string>& args, const std::filesystem::path& scratch,
             const std::vector<std::string>& env = {}, const std::vector<std::string>& launcher = {}) {
    static int counter = 0;
    const std::string stem = "run-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    out_path_ = scratch / (stem + ".out");
    err_path_ = scratch / (stem + ".err");
    const std::string program = launcher.empty() ? cli_path().string() : launcher.front();
    std::vector<std::string> argv_text = launcher;
    if (!launcher.empty()) argv_text.push_back(cli_path().string());
    if (launcher.empty()) argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<std::string> env_text = clean_environment();
    env_text.insert(env_text.end(), env.begin(), env.end());
    spawn(program, argv_text, env_text);
  }
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;
  ~CliProcess() {
    if (pid_ > 0) wait();
  }

  // wait(), but a tool still running after `limit` is killed (exit_code 128 + SIGKILL), so that a
  // hang fails the test instead of stalling it.
  CliResult wait_or_kill(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        CliResult result;
        result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pid_ = -1;
        result.out = read_text(out_path_);
        result.err = read_text(err_path_);
        return result;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    return wait();
  }

  CliResult wait() {
    CliResult result;
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) {
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    pid_ = -1;
    result.out = read_text(out_path_);
    result.err = read_text(err_path_);
    return result;
  }

 private:
  static std::vector<std::string> clean_environment() {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (std::string(*entry).rfind("SHARDJIT_", 0) != 0) env.emplace_back(*entry);
    }
    return env;
  }

  static std::vector<char*> pointers(std::vector<std::string>& texts) {
    std::vector<char*> result;
    for (std::string& text : texts) result.push_back(text.data());
    result.push_back(nullptr);
    return result;
  }

  void spawn(const std::string& program, std::vector<std::string>& argv_text, std::vector<std::string>& env_text) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> argv = pointers(argv_text);
    std::vector<char*> envp = pointers(env_text);
    const int rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("posix_spawn of " + program + " failed: " + std::to_string(rc));
  }

  pid_t pid_ = -1;
  std::filesystem::path out_path_;
  std::filesystem::path err_path_;
};

inline CliResult run_cli(const std::vector<std::string>& args, const std::filesystem::path& scratch,
                         const std::vector<std::string>& env = {}) {
  return CliProcess(args, scratch, env).wait();
}

// setpriv's path, to run the tool as another user; empty where there is none.
inline std::filesystem::path setpriv_path() {
  for (const char* candidate : {"/usr/bin/setpriv", "/bin/setpriv"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return {};
}

// Why run_cli_as_nobody cannot run here, or "" when it can: it needs root and setpriv.
inline std::string nobody_unavailable() {
  if (::geteuid() != 0) return "needs root to run the tool as another user (uid 65534)";
  if (setpriv_path().empty()) return "needs setpriv (util-linux) to run the tool as another user";
  return "";
}

// The entry files (*.sjk) and temporary files in a cache folder's kernels/.
inline std::vector<std::filesystem::path> cache_files(const std::filesystem::path& cache_dir,
                                                      const std::string& suffix_or_prefix, bool prefix) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(cache_dir / "kernels", error)) {
    const std::string name = entry.path().filename().string();
    const bool match = prefix ? name.rfind(suffix_or_prefix, 0) == 0
                              : name.size() >= suffix_or_prefix.size() &&
                                    name.compare(name.size() - suffix_or_prefix.size(), std::string::npos,
                                                 suffix_or_prefix) == 0;
    if (match) files.push_back(entry.path());
  }
  return files;
}

inline std::vector<std::filesystem::path> cache_entries(const std::filesystem::path& cache_dir) {
  return cache_files(cache_dir, ".sjk", false);
}

inline std::vector<std::filesystem::path> cache_temp_files(const std::filesystem::path& cache_dir) {
  return cache_files(cache_dir, std::string(kTempFilePrefix), true);
}

// The shipped test data and example configs.
inline std::filesystem::path test_data(const std::string& name) {
  return std::filesystem::path(SHARDJIT_SOURCE_DIR) / "tests" / "cli" / "data" / name;
}

}  // namespace shardjit::testing
