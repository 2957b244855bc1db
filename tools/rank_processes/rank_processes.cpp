#include "tools/rank_processes/rank_processes.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "shardjit/error.hpp"

namespace shardjit::ranks {
namespace {

using Clock = std::chrono::steady_clock;

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader is gone; nothing to do in a child about to exit
    done += static_cast<std::size_t>(n);
  }
}

// Reads exactly `bytes` bytes from `fd` within `timeout`; false on EOF or timeout.
bool read_exact(int fd, void* out, std::size_t bytes, std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::size_t done = 0;
  while (done < bytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = ::read(fd, static_cast<char*>(out) + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

struct Pipe {
  int read = -1;
  int write = -1;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe() failed");
  return {fds[0], fds[1]};
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The forked processes and the caller's ends of their pipes.
struct Started {
  std::vector<pid_t> pids;
  std::vector<Pipe> results;  // each rank's report comes back through its own
  std::vector<Pipe> ids;      // rank 0 sends the NCCL unique id to rank r through ids[r]
};

// Rank 0 makes the unique id and sends it to the others; the others wait for it.
void share_unique_id(RankContext& context, std::vector<Pipe>& ids) {
  if (context.rank == 0) {
    context.unique_id = Communicator::new_unique_id();
    for (std::size_t r = 1; r < ids.size(); ++r) {
      write_all(ids[r].write, std::string(context.unique_id.data(), context.unique_id.size()));
      close_fd(ids[r].write);
    }
  } else if (!read_exact(ids[static_cast<std::size_t>(context.rank)].read, context.unique_id.data(),
                         context.unique_id.size(), std::chrono::seconds(60))) {
    throw std::runtime_error("rank 0 did not send the NCCL unique id (it could not make one, or died)");
  }
}

// The body of rank `rank`'s process; never returns.
[[noreturn]] void rank_main(int rank, bool share_id, Started& started,
                            const std::function<void(RankContext&)>& body) {
  const auto size = static_cast<int>(started.results.size());
  // Keep only this rank's ends: its result pipe's write end, and its id pipe's read end (rank 0:
  // every id pipe's write end), so that a rank waiting for the id sees rank 0 die.
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    close_fd(started.results[i].read);
    if (r != rank) close_fd(started.results[i].write);
    if (r != rank) close_fd(started.ids[i].read);
    if (rank != 0) close_fd(started.ids[i].write);
  }
  RankContext context;
  context.rank = rank;
  context.size = size;
  try {
    if (share_id) share_unique_id(context, started.ids);
    body(context);
  } catch (const Error& e) {
    context.report.put_text("error", e.what());
    context.report.put_text("error_code", std::to_string(static_cast<int>(e.code())));
  } catch (const std::exception& e) {
    context.report.put_text("error", e.what());
    context.report.put_text("error_code", "-1");
  }
  write_all(started.results[static_cast<std::size_t>(rank)].write, context.report.serialize());
  close_fd(started.results[static_cast<std::size_t>(rank)].write);
  std::fflush(stdout);
  std::fflush(stderr);
  // No atexit handlers, no static destructors: they belong to the calling process.
  ::_exit(0);
}

Started start_ranks(int size, bool share_id, const std::function<void(RankContext&)>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  Started started;
  for (int r = 0; r < size; ++r) {
    started.results.push_back(make_pipe());
    started.ids.push_back(make_pipe());
  }
  for (int r = 0; r < size; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) rank_main(r, share_id, started, body);
    started.pids.push_back(pid);
  }
  for (std::size_t r = 0; r < started.results.size(); ++r) {
    close_fd(started.results[r].write);
    close_fd(started.ids[r].read);
    close_fd(started.ids[r].write);
  }
  return started;
}

// Reads every report concurrently (a rank blocked on a full pipe must not stall the others) until
// each pipe is closed or the deadline passes. Returns the bytes read; `open` says whose pipe was
// still open at the deadline.
std::vector<std::string> read_reports(const std::vector<Pipe>& results, std::chrono::seconds deadline,
                                      std::vector<bool>& open) {
  std::vector<std::string> wire(results.size());
  open.assign(results.size(), true);
  const Clock::time_point end = Clock::now() + deadline;
  std::size_t still_open = results.size();
  while (still_open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    std::vector<pollfd> polls;
    std::vector<std::size_t> which;
    for (std::size_t r = 0; r < results.size(); ++r) {
      if (!open[r]) continue;
      polls.push_back({results[r].read, POLLIN, 0});
      which.push_back(r);
    }
    if (::poll(polls.data(), polls.size(), static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    for (std::size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(polls[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        wire[which[i]].append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        open[which[i]] = false;
        --still_open;
      }
    }
  }
  return wire;
}

// Reaps rank r's process (killing it first if it overran) and reads its report.
RankOutcome reap(int r, pid_t pid, bool overran, std::chrono::seconds deadline, const std::string& wire) {
  RankOutcome outcome;
  outcome.rank = r;
  const std::string who = "rank " + std::to_string(r);
  if (overran) {
    ::kill(pid, SIGKILL);
    outcome.problem = who + " was still running after " + std::to_string(deadline.count()) + " s and was killed";
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (outcome.problem.empty()) {
    if (WIFSIGNALED(status)) {
      outcome.problem = who + " died of signal " + std::to_string(WTERMSIG(status));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      outcome.problem = who + " exited with status " + std::to_string(WEXITSTATUS(status));
    }
  }
  try {
    outcome.report = RankReport::parse(wire);
  } catch (const std::exception& e) {
    if (outcome.problem.empty()) outcome.problem = who + ": " + e.what();
  }
  outcome.finished = outcome.problem.empty();
  outcome.error = outcome.report.text("error");
  if (outcome.report.has("error_code")) outcome.error_code = std::stoi(outcome.report.text("error_code"));
  return outcome;
}

std::vector<RankOutcome> run_processes(int size, bool share_id, const std::function<void(RankContext&)>& body,
                                       std::chrono::seconds deadline) {
  Started started = start_ranks(size, share_id, body);
  std::vector<bool> open;
  const std::vector<std::string> wire = read_reports(started.results, deadline, open);
  std::vector<RankOutcome> outcomes;
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    outcomes.push_back(reap(r, started.pids[i], open[i], deadline, wire[i]));
    close_fd(started.results[i].read);
  }
  return outcomes;
}

}  // namespace

std::vector<RankOutcome> run_ranks(int size, const std::function<void(RankContext&)>& body,
                                   std::chrono::seconds deadline) {
  return run_processes(size, true, body, deadline);
}

RankOutcome run_alone(const std::function<void(RankContext&)>& body, std::chrono::seconds deadline) {
  return run_processes(1, false, body, deadline).front();
}

bool all_ok(const std::vector<RankOutcome>& outcomes) {
  return std::all_of(outcomes.begin(), outcomes.end(),
                     [](const RankOutcome& o) { return o.finished && o.error.empty(); });
}

std::string describe(const std::vector<RankOutcome>& outcomes) {
  std::string text;
  for (const RankOutcome& o : outcomes) {
    text += "\n  rank " + std::to_string(o.rank) + ": ";
    if (!o.problem.empty()) {
      text += o.problem;
    } else if (!o.error.empty()) {
      text += "error (code " + std::to_string(o.error_code) + "): " + o.error;
    } else {
      text += "ok";
    }
  }
  return text;
}

}  // namespace shardjit::ranks
