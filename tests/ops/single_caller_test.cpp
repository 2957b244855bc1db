#include <future>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/ops/single_caller.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

// Enters `caller` on a thread of its own; the result is the error's message, empty if it entered.
std::string enter_from_another_thread(SingleCaller& caller) {
  return std::async(std::launch::async, [&caller]() -> std::string {
           try {
             const SingleCaller::Scope scope(caller, "Op::run");
             return "";
           } catch (const Error& error) {
             EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
             return error.what();
           }
         })
      .get();
}

TEST(SingleCaller, RefusesASecondThreadWhileACallRuns) {
  SingleCaller caller;
  {
    const SingleCaller::Scope held(caller, "Op::forward");
    const std::string message = enter_from_another_thread(caller);
    EXPECT_NE(message.find("Op::run: another thread is inside a call of this op"), std::string::npos) << message;
  }
  // Released: the other thread gets in, and the op is free again after it left.
  EXPECT_EQ(enter_from_another_thread(caller), "");
  EXPECT_EQ(enter_from_another_thread(caller), "");
}

TEST(SingleCaller, TheHoldingThreadMayEnterAgain) {
  SingleCaller caller;
  const SingleCaller::Scope outer(caller, "Op::forward");
  {
    const SingleCaller::Scope inner(caller, "Op::check");
  }
  // Leaving the inner scope did not release the outer one.
  EXPECT_NE(enter_from_another_thread(caller), "");
}

TEST(SingleCaller, ACallThatThrowsReleasesTheOp) {
  SingleCaller caller;
  EXPECT_THROW(
      {
        const SingleCaller::Scope scope(caller, "Op::forward");
        throw Error(ErrorCode::kInvalidArgument, "bad input");
      },
      Error);
  EXPECT_EQ(enter_from_another_thread(caller), "");
}

}  // namespace
}  // namespace shardjit
