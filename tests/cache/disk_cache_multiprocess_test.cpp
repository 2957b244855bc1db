// Several processes asking the disk cache for the same keys at once: each key is made once, the
// others load the winner's entry, and nothing half-written is left behind.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cache/atomic_file.hpp"
#include "runtime/cache/cache_dir.hpp"
#include "runtime/cache/disk_cache.hpp"
#include "runtime/cache/sha256.hpp"
#include "support/temp_dir.hpp"
#include "tests/cache/cache_test_util.hpp"

namespace shardjit {
namespace {

namespace fs = std::filesystem;
using test::test_entry;
using test::test_key;
using testing::TempDir;

constexpr int kChildren = 6;
const std::vector<std::string> kNames = {"k0", "k1", "k2"};

// What a child does: wait for the start signal, get every key (starting at a different one per
// child), record a digest of what it got, and exit 0 only if every entry is the expected one.
[[noreturn]] void run_child(int index, int start_fd, const fs::path& cache_dir,
                            const fs::path& made_log, const fs::path& results) {
  char go = 0;
  if (::read(start_fd, &go, 1) < 0) ::_exit(3);
  try {
    DiskCache cache(cache_dir, UINT64_MAX, true);
    std::string digests;
    bool all_expected = true;
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      const std::string& name = kNames[(index + i) % kNames.size()];
      auto make = [&] {
        int fd = ::open(made_log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
        std::string line = name + "\n";
        if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
          ::_exit(4);
        }
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // widen the race window
        return test_entry(name, 4096);
      };
      CacheEntry got = cache.get_or_create(test_key(name), make);
      all_expected = all_expected && got == test_entry(name, 4096);
      digests += name + " " + sha256_hex(encode_entry(got)) + "\n";
    }
    std::ofstream(results / std::to_string(index)) << digests;
    ::_exit(all_expected ? 0 : 1);
  } catch (...) {
    ::_exit(2);
  }
}

TEST(DiskCacheMultiProcess, EachKeyIsMadeOnceAndEveryProcessGetsTheSameBytes) {
  TempDir temp;
  const fs::path cache_dir = temp.path() / "cache";
  const fs::path made_log = temp.path() / "made.log";
  const fs::path results = temp.path() / "results";
  fs::create_directory(results);

  int start[2];
  ASSERT_EQ(::pipe(start), 0);
  std::vector<pid_t> children;
  for (int i = 0; i < kChildren; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(start[1]);
      run_child(i, start[0], cache_dir, made_log, results);
    }
    children.push_back(pid);
  }
  ::close(start[0]);
  ::close(start[1]);  // end of file on the pipe: every child starts now

  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "child " << pid << ": 1 wrong entry, 2 exception, 3/4 test plumbing failed";
  }

  std::map<std::string, int> made;
  std::ifstream log_in(made_log);
  for (std::string line; std::getline(log_in, line);) ++made[line];
  for (const std::string& name : kNames)
    EXPECT_EQ(made[name], 1) << name << " was made " << made[name] << " times";
  EXPECT_EQ(made.size(), kNames.size());

  std::string first;
  for (int i = 0; i < kChildren; ++i) {
    std::ifstream in(results / std::to_string(i));
    std::map<std::string, std::string> by_name;
    for (std::string name, digest; in >> name >> digest;) by_name[name] = digest;
    std::string joined;
    for (const auto& [name, digest] : by_name) joined += name + "=" + digest + ";";
    if (i == 0) first = joined;
    EXPECT_EQ(joined, first) << "child " << i << " got other bytes";
  }
  EXPECT_EQ(std::count(first.begin(), first.end(), ';'), 3);

  std::vector<std::string> files;
  for (const auto& file : fs::directory_iterator(cache_kernels_dir(cache_dir))) {
    files.push_back(file.path().filename().string());
  }
  EXPECT_EQ(files.size(), kNames.size());
  for (const std::string& file : files) {
    EXPECT_FALSE(is_temp_file_name(file)) << file;
    EXPECT_EQ(fs::path(file).extension(), ".sjk") << file;
  }
}

}  // namespace
}  // namespace shardjit
