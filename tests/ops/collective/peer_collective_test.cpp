// The host-side rules of the cross-GPU ops that need no GPU: configs compared between ranks,
// the views a call passes, the chunk width a row allows, and the kernels a prewarm compiles for them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/ops/collective/kernels.hpp"
#include "runtime/ops/collective/peer_collective.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

TEST(PeerCollective, EqualConfigsPassAndADifferenceNamesBothRanks) {
  EXPECT_NO_THROW(check_same_config({"hidden=4096 world=2", "hidden=4096 world=2"}, "ReduceScatter"));
  try {
    check_same_config({"hidden=4096", "hidden=4096", "hidden=2048"}, "ReduceScatter");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 0 has {hidden=4096} and rank 2 has {hidden=2048}"), std::string::npos) << message;
  }
}

std::string view_error(const MatrixView& view, std::int64_t rows) {
  try {
    check_collective_view("MoeCombine", view, "gates", DType::kFP32, rows, 4, 4);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "";
}

TEST(PeerCollective, ViewsAreCheckedAndAnAbsentOneOfNoRowsIsFine) {
  alignas(16) static float gates[8 * 4];
  EXPECT_EQ(view_error(MatrixView{gates, DType::kFP32, 8, 4, 0}, 8), "");
  // A negative count is refused even where the expected count is the view's own (MoeCombine's
  // tokens are its output's rows), and even without data.
  EXPECT_NE(view_error(MatrixView{gates, DType::kFP32, -1, 4, 0}, -1).find("gates has -1 rows; expected >= 0"),
            std::string::npos);
  EXPECT_NE(view_error(MatrixView{nullptr, DType::kFP32, -1, 4, 0}, -1).find("gates has -1 rows"), std::string::npos);
  EXPECT_NE(view_error(MatrixView{gates, DType::kBF16, 8, 4, 0}, 8).find("gates has dtype bf16; expected fp32"),
            std::string::npos);
  EXPECT_NE(view_error(MatrixView{gates, DType::kFP32, 7, 4, 0}, 8).find("expected [8, 4]"), std::string::npos);
  EXPECT_NE(view_error(MatrixView{gates, DType::kFP32, 8, 4, 5}, 8).find("row_stride 5"), std::string::npos);
  EXPECT_NE(view_error(MatrixView{reinterpret_cast<char*>(gates) + 2, DType::kFP32, 8, 4, 0}, 8).find("4-byte"),
            std::string::npos);
  EXPECT_NE(view_error(MatrixView{nullptr, DType::kFP32, 8, 4, 0}, 8).find("gates is null"), std::string::npos);
  // No tokens: a null view as a C caller leaves it (zeroed, so bf16 and [0, 0]) is fine.
  EXPECT_EQ(view_error(MatrixView{}, 0), "");
}

TEST(PeerCollective, ChunksAreTheWidestWholeDivisorOfARow) {
  EXPECT_EQ(collective_vector_bytes(8192, "t"), 16);  // bf16, H 4096
  EXPECT_EQ(collective_vector_bytes(2004, "t"), 4);   // bf16, H 1002
  EXPECT_EQ(collective_vector_bytes(520, "t"), 8);    // fp32, H 130
  try {
    collective_vector_bytes(510, "MoeCombine");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("MoeCombine: a row of 510 bytes"), std::string::npos) << e.what();
  }
}

TEST(PeerCollective, PrewarmListsTheReduceScatterAndBothMoeCombines) {
  const std::vector<KernelSpec> specs = collective_kernels(DType::kBF16, 4, 7168);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0].canonical_text(), "reduce_scatter<T=bf16,WORLD=4,VEC_BYTES=16>");
  EXPECT_EQ(specs[1].canonical_text(), "moe_combine<T=bf16,WORLD=4,H=7168,VEC_BYTES=16,GATES=false>");
  EXPECT_EQ(specs[2].canonical_text(), "moe_combine<T=bf16,WORLD=4,H=7168,VEC_BYTES=16,GATES=true>");
  EXPECT_NE(collective_prewarm_command(DType::kFP16, 2, 4096, "sm_90a")
                .find("shardjit prewarm --collectives-only --hidden 4096 --tp 2 --dtype fp16 --arch sm_90a"),
            std::string::npos);
}

}  // namespace
}  // namespace shardjit
