// The C API under host memory exhaustion: every allocation of the calling thread fails, and no
// exception may reach the C caller; the call returns a status, and the last error says what it
// can. Its own executable, because it replaces the global operator new.
#include <unistd.h>

#include <cstdlib>
#include <new>
#include <string>

#include <gtest/gtest.h>

#include "shardjit/c_api.h"

namespace {
thread_local bool g_refuse_allocations = false;
}  // namespace

void* operator new(std::size_t bytes) {
  if (g_refuse_allocations) throw std::bad_alloc();
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Runs `call` with every allocation of this thread refused.
template <class Call>
shardjit_status without_memory(Call&& call) {
  g_refuse_allocations = true;
  const shardjit_status status = call();
  g_refuse_allocations = false;
  return status;
}

TEST(CApiOutOfMemory, ANullArgumentIsStillAStatus) {
  int rank = -1;
  const shardjit_status status = without_memory([&] { return shardjit_comm_rank(nullptr, &rank); });
  EXPECT_EQ(status, SHARDJIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rank, -1);
  EXPECT_NE(std::string(shardjit_last_error()), "");
}

TEST(CApiOutOfMemory, AFailedBuildIsAStatusAndLeavesNoHandle) {
  shardjit_runtime_options options;
  shardjit_runtime_options_init(&options);
  shardjit_runtime* runtime = reinterpret_cast<shardjit_runtime*>(&options);  // any non-NULL value
  const shardjit_status status = without_memory([&] { return shardjit_runtime_create(&options, &runtime); });
  EXPECT_EQ(status, SHARDJIT_ERROR_INTERNAL);
  EXPECT_EQ(runtime, nullptr);
  const std::string message = shardjit_last_error();
  EXPECT_NE(message.find("out of host memory"), std::string::npos) << message;

  // With memory again, the thread's next call succeeds and clears the error.
  char folder[] = "/tmp/shardjit-c-api-oom-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  options.cache_dir = folder;
  options.jit = 0;  // cache-only: the folder is only read, never filled
  ASSERT_EQ(shardjit_runtime_create(&options, &runtime), SHARDJIT_OK) << shardjit_last_error();
  EXPECT_EQ(std::string(shardjit_last_error()), "");
  shardjit_runtime_destroy(runtime);
  ::rmdir(folder);
}

}  // namespace
