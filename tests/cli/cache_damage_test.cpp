// `shardjit` against a damaged or hostile cache, dump or template folder: what cannot be kept,
// removed or trusted is named and fails the command; nothing is followed or overwritten.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "support/temp_dir.hpp"
#include "tests/cli/cli_runner.hpp"

namespace shardjit::testing {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kLimit{120};

class CliCacheDamage : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directory(scratch_); }
  // The three collective kernels at H = 64, TP 2: the smallest prewarm (about a second).
  std::vector<std::string> prewarm_args(const fs::path& cache) const {
    return {"--cache-dir", cache.string(), "prewarm", "--collectives-only", "--hidden", "64",
            "--tp",        "2",            "--dtype", "bf16",              "--arch",   "sm_80", "--jobs", "2"};
  }
  CliResult run(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    return CliProcess(args, scratch_, env).wait_or_kill(kLimit);
  }
  TempDir temp_;
  fs::path cache_ = temp_.path() / "cache";
  fs::path scratch_ = temp_.path() / "scratch";
};

TEST_F(CliCacheDamage, PrewarmFailsNamingAKernelItCannotStore) {
  ASSERT_EQ(run(prewarm_args(cache_)).exit_code, 0);
  const fs::path entry = cache_entries(cache_).front();
  fs::remove(entry);
  fs::create_directories(entry / "sub");
  const CliResult result = run(prewarm_args(cache_));
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.err.find("missing: "), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(entry.string() + "' does not verify"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("size cap"), std::string::npos) << result.err;
}

TEST_F(CliCacheDamage, PrewarmFailsOnAnImmutableCorruptEntry) {
  ASSERT_EQ(run(prewarm_args(cache_)).exit_code, 0);
  const fs::path entry = cache_entries(cache_).front();
  fs::resize_file(entry, 100);
  if (std::system(("chattr +i '" + entry.string() + "' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "chattr +i is not available here (needs CAP_LINUX_IMMUTABLE and ext4/xfs/btrfs)";
  }
  const CliResult result = run(prewarm_args(cache_));
  std::system(("chattr -i '" + entry.string() + "'").c_str());
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.err.find(entry.string() + "' does not verify"), std::string::npos) << result.err;
}

TEST_F(CliCacheDamage, VerifyRemoveReportsWhatItCouldNotRemove) {
  ASSERT_EQ(run(prewarm_args(cache_)).exit_code, 0);
  const fs::path entry = cache_entries(cache_).front();
  fs::remove(entry);
  fs::create_directories(entry / "sub");
  const CliResult result = run({"--cache-dir", cache_.string(), "verify", "--remove"});
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find("NOT removed"), std::string::npos) << result.out;
  EXPECT_EQ(result.out.find("(removed)"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("could not be removed"), std::string::npos) << result.err;
}

TEST_F(CliCacheDamage, GcRemovesTruncatedAndGarbageEntries) {
  ASSERT_EQ(run(prewarm_args(cache_)).exit_code, 0);
  const fs::path entry = cache_entries(cache_).front();
  fs::resize_file(entry, 100000);
  std::ofstream(cache_ / "kernels" / "notakey.sjk") << "garbage";
  const CliResult result = run({"--cache-dir", cache_.string(), "gc"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("removed 2 bad entries"), std::string::npos) << result.out;
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_FALSE(fs::exists(cache_ / "kernels" / "notakey.sjk"));
  EXPECT_EQ(cache_entries(cache_).size(), 2u);
}

// Another user's links, named like dump files, in a world-writable dump folder: the folder is
// refused with one warning, the linked file keeps its content, and the prewarm succeeds.
TEST_F(CliCacheDamage, ADumpFolderOthersCanWriteIsRefusedAndItsLinksNotFollowed) {
  const fs::path own_dumps = temp_.path() / "dumps";
  ASSERT_EQ(run(prewarm_args(cache_), {"SHARDJIT_DUMP_DIR=" + own_dumps.string()}).exit_code, 0);
  const fs::path hostile = temp_.path() / "dumpx";
  fs::create_directory(hostile);
  ASSERT_EQ(::chmod(hostile.c_str(), 01777), 0);
  const fs::path victim = temp_.path() / "victim";
  std::ofstream(victim) << "secret";
  ASSERT_EQ(::chmod(victim.c_str(), 0600), 0);
  for (const auto& dumped : fs::directory_iterator(own_dumps)) {
    fs::create_symlink(victim, hostile / dumped.path().filename());
  }
  const CliResult result = run(prewarm_args(temp_.path() / "cache2"), {"SHARDJIT_DUMP_DIR=" + hostile.string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(read_text(victim), "secret");
  const std::size_t first = result.err.find("not dumping");
  EXPECT_NE(first, std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("not dumping", first + 1), std::string::npos) << "warned more than once:\n" << result.err;
}

TEST_F(CliCacheDamage, ADumpPathThatIsAFileIsOneWarning) {
  const fs::path file = temp_.path() / "afile";
  std::ofstream(file) << "x";
  const CliResult result = run(prewarm_args(cache_), {"SHARDJIT_DUMP_DIR=" + file.string()});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  const std::size_t first = result.err.find("not dumping");
  EXPECT_NE(first, std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("not dumping", first + 1), std::string::npos) << result.err;
  EXPECT_EQ(read_text(file), "x");
}

TEST_F(CliCacheDamage, ATemplateFolderOthersCanWriteIsRefused) {
  const fs::path templates = temp_.path() / "templates";
  fs::copy(fs::path(SHARDJIT_SOURCE_DIR) / "templates", templates, fs::copy_options::recursive);
  ASSERT_EQ(::chmod(templates.c_str(), 0777), 0);
  const CliResult result = run(prewarm_args(cache_), {"SHARDJIT_TEMPLATE_DIR=" + templates.string()});
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.err.find("template folder"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("writable by others"), std::string::npos) << result.err;
  EXPECT_TRUE(cache_entries(cache_).empty());
}

// A user who cannot write the cache folder (root's, shipped read-only) is told so before any
// compile: a prewarm that keeps nothing is no prewarm.
TEST_F(CliCacheDamage, PrewarmIntoAFolderTheUserCannotWriteIsRefused) {
  const std::string why = nobody_unavailable();
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(::chmod(temp_.path().c_str(), 0755), 0);
  fs::create_directory(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0755), 0);
  const CliResult result =
      CliProcess(prewarm_args(cache_), scratch_, {}, {setpriv_path().string(), "--reuid=65534", "--regid=65534",
                                                      "--clear-groups", "--"})
          .wait_or_kill(kLimit);
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.err.find("not writable"), std::string::npos) << result.err;
  EXPECT_TRUE(cache_entries(cache_).empty());
}

}  // namespace
}  // namespace shardjit::testing
