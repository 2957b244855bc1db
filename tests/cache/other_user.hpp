// Runs a piece of a test as another user (uid and gid 65534, "nobody"), for the attacks and
// failures that need one: a cache folder of root's that the user cannot read, a folder the user
// cannot write. Only root can become another user; without root the caller skips, naming why.
#pragma once

#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <optional>
#include <string>

namespace shardjit::test {

inline constexpr uid_t kNobodyUid = 65534;

// Why run_as_other_user cannot run here, or "" when it can.
inline std::string other_user_unavailable() {
  return ::geteuid() == 0 ? "" : "needs root to act as another user (uid 65534), and this test runs as uid " +
                                     std::to_string(::geteuid());
}

// Runs `body` in a child process as uid/gid 65534 and returns its exit status: body's value (0 for
// success, small numbers for the step that failed), 125 when the child could not change users,
// 126 when body threw, 128 + signal when it died (it is killed after `seconds`).
inline int run_as_other_user(const std::function<int()>& body, unsigned seconds = 120) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobodyUid) != 0 || ::setuid(kNobodyUid) != 0) ::_exit(125);
    int status = 126;
    try {
      status = body();
    } catch (...) {
    }
    ::_exit(status);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace shardjit::test
