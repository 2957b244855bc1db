#include "rank_processes.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardjit::bench {
namespace {

bool write_all(int fd, const void* data, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, static_cast<const char*>(data) + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t bytes) {
  std::size_t done = 0;
  while (done < bytes) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 120000) <= 0) return false;  // rank 0 makes the id in well under two minutes
    const ssize_t n = ::read(fd, static_cast<char*>(data) + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

[[noreturn]] void rank_main(int rank, int ranks, std::vector<int>& id_read, std::vector<int>& id_write,
                            const std::function<void(int, const CommUniqueId&)>& body) {
  // Rank 0 keeps the write ends, the others only their read end (so that they see rank 0 die).
  for (int r = 0; r < ranks; ++r) {
    if (rank != 0) ::close(id_write[static_cast<std::size_t>(r)]);
    if (rank == 0 || r != rank) ::close(id_read[static_cast<std::size_t>(r)]);
  }
  int status = 0;
  try {
    CommUniqueId id{};
    if (rank == 0) {
      id = Communicator::new_unique_id();
      for (int r = 1; r < ranks; ++r) {
        write_all(id_write[static_cast<std::size_t>(r)], id.data(), id.size());
        ::close(id_write[static_cast<std::size_t>(r)]);
      }
    } else if (!read_all(id_read[static_cast<std::size_t>(rank)], id.data(), id.size())) {
      throw std::runtime_error("rank 0 did not send the NCCL unique id");
    }
    body(rank, id);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardjit-bench rank %d: %s\n", rank, e.what());
    status = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(status);
}

}  // namespace

int run_rank_processes(int ranks, const std::function<void(int, const CommUniqueId&)>& body) {
  std::vector<int> id_read(static_cast<std::size_t>(ranks), -1), id_write(static_cast<std::size_t>(ranks), -1);
  for (int r = 0; r < ranks; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe() failed");
    id_read[static_cast<std::size_t>(r)] = fds[0];
    id_write[static_cast<std::size_t>(r)] = fds[1];
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) rank_main(r, ranks, id_read, id_write, body);
    pids.push_back(pid);
  }
  for (int fd : id_read) ::close(fd);
  for (int fd : id_write) ::close(fd);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}

}  // namespace shardjit::bench
