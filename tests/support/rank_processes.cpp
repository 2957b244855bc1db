#include "support/rank_processes.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "runtime/comm/nccl_library.hpp"
#include "runtime/driver/cuda_driver.hpp"
#include "runtime/driver/device.hpp"
#include "shardjit/error.hpp"

namespace shardjit::testing {
namespace {

using Clock = std::chrono::steady_clock;

void append_u64(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

std::uint64_t read_u64(const std::string& in, std::size_t& at) {
  if (at + 8 > in.size()) throw std::runtime_error("truncated rank report");
  std::uint64_t value = 0;
  std::memcpy(&value, in.data() + at, 8);
  at += 8;
  return value;
}

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

// The body of rank `rank`'s process; never returns.
[[noreturn]] void rank_main(int rank, int size, std::vector<Pipe>& results, std::vector<Pipe>& ids,
                            const std::function<void(RankContext&)>& body) {
  // Keep only this rank's ends: its result pipe's write end, and its id pipe's read end (rank 0:
  // every id pipe's write end).
  for (int r = 0; r < size; ++r) {
    close_fd(results[static_cast<std::size_t>(r)].read);
    if (r != rank) close_fd(results[static_cast<std::size_t>(r)].write);
    if (r != rank) close_fd(ids[static_cast<std::size_t>(r)].read);
    if (rank != 0) close_fd(ids[static_cast<std::size_t>(r)].write);
  }
  RankContext context;
  context.rank = rank;
  context.size = size;
  try {
    if (rank == 0) {
      context.unique_id = Communicator::new_unique_id();
      for (int r = 1; r < size; ++r) {
        write_all(ids[static_cast<std::size_t>(r)].write,
                  std::string(context.unique_id.data(), context.unique_id.size()));
        close_fd(ids[static_cast<std::size_t>(r)].write);
      }
    } else if (!read_exact(ids[static_cast<std::size_t>(rank)].read, context.unique_id.data(),
                           context.unique_id.size(), std::chrono::seconds(60))) {
      throw std::runtime_error("rank 0 did not send the NCCL unique id (it could not make one, or died)");
    }
    body(context);
  } catch (const Error& e) {
    context.report.put_text("error", e.what());
    context.report.put_text("error_code", std::to_string(static_cast<int>(e.code())));
  } catch (const std::exception& e) {
    context.report.put_text("error", e.what());
    context.report.put_text("error_code", "-1");
  }
  write_all(results[static_cast<std::size_t>(rank)].write, context.report.serialize());
  close_fd(results[static_cast<std::size_t>(rank)].write);
  std::fflush(stdout);
  std::fflush(stderr);
  // No atexit handlers, no static destructors: they belong to the test process.
  ::_exit(0);
}

}  // namespace

void RankReport::put_bytes(const std::string& key, const void* data, std::size_t bytes) {
  entries_[key] = std::string(static_cast<const char*>(data), bytes);
}

const std::string& RankReport::bytes(const std::string& key) const {
  auto found = entries_.find(key);
  if (found == entries_.end()) throw std::out_of_range("rank report has no '" + key + "'");
  return found->second;
}

std::string RankReport::serialize() const {
  std::string out;
  for (const auto& [key, value] : entries_) {
    append_u64(out, key.size());
    out += key;
    append_u64(out, value.size());
    out += value;
  }
  return out;
}

RankReport RankReport::parse(const std::string& wire) {
  RankReport report;
  std::size_t at = 0;
  while (at < wire.size()) {
    const std::uint64_t key_size = read_u64(wire, at);
    if (at + key_size > wire.size()) throw std::runtime_error("truncated rank report");
    std::string key = wire.substr(at, key_size);
    at += key_size;
    const std::uint64_t value_size = read_u64(wire, at);
    if (at + value_size > wire.size()) throw std::runtime_error("truncated rank report");
    report.entries_[key] = wire.substr(at, value_size);
    at += value_size;
  }
  return report;
}

std::vector<RankOutcome> run_ranks(int size, const std::function<void(RankContext&)>& body,
                                   std::chrono::seconds deadline) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<Pipe> results, ids;
  for (int r = 0; r < size; ++r) {
    results.push_back(make_pipe());
    ids.push_back(make_pipe());
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) rank_main(r, size, results, ids, body);
    pids.push_back(pid);
  }
  for (int r = 0; r < size; ++r) {
    close_fd(results[static_cast<std::size_t>(r)].write);
    close_fd(ids[static_cast<std::size_t>(r)].read);
    close_fd(ids[static_cast<std::size_t>(r)].write);
  }

  // Read every report concurrently (a rank blocked on a full pipe must not stall the others).
  std::vector<std::string> wire(static_cast<std::size_t>(size));
  std::vector<bool> open(static_cast<std::size_t>(size), true);
  const Clock::time_point end = Clock::now() + deadline;
  int still_open = size;
  while (still_open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
    if (left <= 0) break;
    std::vector<pollfd> polls;
    std::vector<int> which;
    for (int r = 0; r < size; ++r) {
      if (!open[static_cast<std::size_t>(r)]) continue;
      polls.push_back({results[static_cast<std::size_t>(r)].read, POLLIN, 0});
      which.push_back(r);
    }
    if (::poll(polls.data(), polls.size(), static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    for (std::size_t i = 0; i < polls.size(); ++i) {
      if (polls[i].revents == 0) continue;
      const auto r = static_cast<std::size_t>(which[i]);
      char buffer[65536];
      const ssize_t n = ::read(polls[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        wire[r].append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        open[r] = false;
        --still_open;
      }
    }
  }

  std::vector<RankOutcome> outcomes(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    const auto i = static_cast<std::size_t>(r);
    RankOutcome& outcome = outcomes[i];
    outcome.rank = r;
    if (open[i]) {
      ::kill(pids[i], SIGKILL);
      outcome.problem = "rank " + std::to_string(r) + " was still running after " +
                        std::to_string(deadline.count()) + " s and was killed";
    }
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    close_fd(results[i].read);
    if (outcome.problem.empty()) {
      if (WIFSIGNALED(status)) {
        outcome.problem = "rank " + std::to_string(r) + " died of signal " + std::to_string(WTERMSIG(status));
      } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        outcome.problem = "rank " + std::to_string(r) + " exited with status " + std::to_string(WEXITSTATUS(status));
      }
    }
    try {
      outcome.report = RankReport::parse(wire[i]);
    } catch (const std::exception& e) {
      if (outcome.problem.empty()) outcome.problem = "rank " + std::to_string(r) + ": " + e.what();
    }
    outcome.finished = outcome.problem.empty();
    outcome.error = outcome.report.text("error");
    if (outcome.report.has("error_code")) outcome.error_code = std::stoi(outcome.report.text("error_code"));
  }
  return outcomes;
}

namespace {

// The probe's child: counts GPUs, tries NCCL, reports; never returns.
[[noreturn]] void probe_main(int fd) {
  RankReport report;
  const int gpus = device_count();
  report.put_text("gpus", std::to_string(gpus));
  if (gpus == 0) {
    try {
      driver();
      report.put_text("problem", "the CUDA driver reports no GPU");
    } catch (const std::exception& e) {
      report.put_text("problem", e.what());
    }
  }
  const NcclLoad nccl_load = load_nccl(kNcclLibrary);
  report.put_text("nccl", nccl_load.ok ? "1" : "0");
  if (!nccl_load.ok) report.put_text("nccl_problem", nccl_load.error);
  write_all(fd, report.serialize());
  ::close(fd);
  ::_exit(0);
}

}  // namespace

const MultiGpuProbe& probe_multi_gpu() {
  static const MultiGpuProbe probe = [] {
    MultiGpuProbe result;
    Pipe pipe = make_pipe();
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
      close_fd(pipe.read);
      probe_main(pipe.write);
    }
    close_fd(pipe.write);
    std::string wire;
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(pipe.read, buffer, sizeof(buffer))) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      wire.append(buffer, static_cast<std::size_t>(n));
    }
    close_fd(pipe.read);
    int status = 0;
    ::waitpid(pid, &status, 0);
    try {
      const RankReport report = RankReport::parse(wire);
      result.gpus = std::stoi(report.text("gpus"));
      result.nccl = report.text("nccl") == "1";
      result.problem = report.text("problem");
      if (!result.nccl) result.problem += (result.problem.empty() ? "" : "; ") + report.text("nccl_problem");
    } catch (const std::exception& e) {
      result.problem = std::string("the probe process failed: ") + e.what();
    }
    return result;
  }();
  return probe;
}

std::string multi_gpu_skip_reason(int ranks) {
  const MultiGpuProbe& probe = probe_multi_gpu();
  if (probe.gpus < ranks) {
    return "needs " + std::to_string(ranks) + " GPUs; this machine has " + std::to_string(probe.gpus) +
           (probe.problem.empty() ? std::string() : " (" + probe.problem + ")");
  }
  if (!probe.nccl) return "needs NCCL: " + probe.problem;
  return {};
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

}  // namespace shardjit::testing
