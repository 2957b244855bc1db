// NCCL is opened at run time: a missing or unsuitable library is a clear error, and the rest of
// the library keeps working without it.
#include <gtest/gtest.h>

#include <string>

#include "runtime/comm/nccl_library.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(NcclLibrary, AMissingLibraryIsAClearError) {
  const NcclLoad load = load_nccl("libnccl-that-is-not-installed.so.2");
  EXPECT_FALSE(load.ok);
  EXPECT_TRUE(contains(load.error, "NCCL could not be opened")) << load.error;
  EXPECT_TRUE(contains(load.error, "libnccl-that-is-not-installed.so.2")) << load.error;
  EXPECT_TRUE(contains(load.error, "2.14")) << "says which NCCL is needed: " << load.error;
  EXPECT_TRUE(contains(load.error, "LD_LIBRARY_PATH")) << "says how to provide it: " << load.error;
}

TEST(NcclLibrary, ALibraryWithoutTheEntryPointsIsNamed) {
  const NcclLoad load = load_nccl("libc.so.6");
  EXPECT_FALSE(load.ok);
  EXPECT_TRUE(contains(load.error, "libc.so.6 has no entry point ncclGetVersion")) << load.error;
}

TEST(NcclLibrary, VersionText) {
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(21400), "2.14.0");
  EXPECT_EQ(nccl_version_text(2708), "2.7.8");
}

TEST(NcclLibrary, TheProcessLibraryOrAClearError) {
  if (!nccl_available()) {
    try {
      nccl();
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCommError);
      EXPECT_TRUE(contains(e.what(), "NCCL")) << e.what();
    }
    return;
  }
  EXPECT_GE(nccl().version, kMinNcclVersion);
}

TEST(NcclLibrary, ChecksNameTheCallAndNcclsText) {
  if (!nccl_available()) GTEST_SKIP() << "no NCCL on this machine";
  const NcclApi& api = nccl();
  EXPECT_NO_THROW(check_nccl(api, ncclSuccess, "ncclAllGather", nullptr));
  EXPECT_NO_THROW(check_nccl(api, ncclInProgress, "ncclAllGather", nullptr));
  try {
    check_nccl(api, ncclInvalidArgument, "ncclAllGather", nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCommError);
    EXPECT_TRUE(contains(e.what(), "ncclAllGather failed: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), api.ncclGetErrorString(ncclInvalidArgument))) << e.what();
  }
}

}  // namespace
}  // namespace shardjit
