#include <gtest/gtest.h>

#include "runtime/ops/view_checks.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

void* address(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

void expect_rejected(const std::function<void()>& check, const std::string& needle) {
  try {
    check();
    FAIL() << "expected rejection mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ViewChecks, AcceptsAlignedPackedAndStridedMatrices) {
  EXPECT_EQ(check_matrix({address(0x1000), DType::kBF16, 4, 64, 0}, "hidden", DType::kBF16, -1, 64), 64);
  EXPECT_EQ(check_matrix({address(0x1000), DType::kBF16, 4, 64, 72}, "hidden", DType::kBF16, 4, 64), 72);
}

TEST(ViewChecks, RejectsWhatTheKernelsCannotRead) {
  expect_rejected([] { check_matrix({address(0x1000), DType::kFP16, 4, 64, 0}, "hidden", DType::kBF16, -1, 64); },
                  "dtype is fp16; expected bf16");
  expect_rejected([] { check_matrix({address(0x1000), DType::kBF16, 4, 32, 0}, "hidden", DType::kBF16, -1, 64); },
                  "32 columns; expected 64");
  expect_rejected([] { check_matrix({address(0x1000), DType::kBF16, 3, 64, 0}, "weight", DType::kBF16, 4, 64); },
                  "weight: has 3 rows; expected 4");
  expect_rejected([] { check_matrix({address(0x1002), DType::kBF16, 4, 64, 0}, "hidden", DType::kBF16, -1, 64); },
                  "16-byte aligned");
  expect_rejected([] { check_matrix({address(0x1000), DType::kBF16, 4, 64, 68}, "hidden", DType::kBF16, -1, 64); },
                  "multiple of 16 bytes");
  expect_rejected([] { check_matrix({address(0x1000), DType::kBF16, 4, 64, 32}, "hidden", DType::kBF16, -1, 64); },
                  "smaller than");
  expect_rejected([] { check_matrix({nullptr, DType::kBF16, 4, 64, 0}, "hidden", DType::kBF16, -1, 64); }, "null");
}

TEST(ViewChecks, EmptyMatricesNeedNoData) {
  EXPECT_NO_THROW(check_matrix({nullptr, DType::kBF16, 0, 64, 0}, "hidden", DType::kBF16, -1, 64));
}

TEST(ViewChecks, Vectors) {
  EXPECT_TRUE(check_vector({address(0x1000), DType::kInt64, 5}, "targets", DType::kInt64, 5, false));
  EXPECT_FALSE(check_vector({nullptr, DType::kFP32, 5}, "lse", DType::kFP32, 5, true));
  expect_rejected([] { check_vector({nullptr, DType::kFP32, 5}, "logp", DType::kFP32, 5, false); }, "logp: data is null");
  expect_rejected([] { check_vector({address(0x1000), DType::kInt32, 5}, "targets", DType::kInt64, 5, false); },
                  "dtype is int32; expected int64");
  expect_rejected([] { check_vector({address(0x1000), DType::kFP32, 4}, "logp", DType::kFP32, 5, false); },
                  "4 elements; expected 5");
  expect_rejected([] { check_vector({address(0x1002), DType::kFP32, 5}, "logp", DType::kFP32, 5, false); }, "aligned");
}

// Outputs that share bytes with each other or with an input are refused by both names; views that
// only touch end to start, absent ones, and inputs that overlap each other are fine.
TEST(ViewChecks, OverlappingOutputsAreRefused) {
  const VectorView logp{address(0x1000), DType::kFP32, 8};       // [0x1000, 0x1020)
  const VectorView lse{address(0x1020), DType::kFP32, 8};        // right after logp
  const VectorView lse_on_logp{address(0x101c), DType::kFP32, 8};
  const MatrixView hidden{address(0x2000), DType::kBF16, 4, 64, 72};  // rows of 144 bytes, 560 in all
  const MatrixView grad_hidden_after{address(0x2000 + 560), DType::kBF16, 4, 64, 0};
  const MatrixView grad_hidden_in_last_row{address(0x2000 + 448), DType::kBF16, 4, 64, 0};
  EXPECT_NO_THROW(check_no_overlap({span_of("logp", logp), span_of("lse", lse)}, {span_of("hidden", hidden)}));
  EXPECT_NO_THROW(check_no_overlap({span_of("lse", VectorView{}), span_of("logp", logp)}, {span_of("bias", VectorView{})}));
  EXPECT_NO_THROW(check_no_overlap({span_of("grad_hidden", grad_hidden_after)}, {span_of("hidden", hidden)}));
  EXPECT_NO_THROW(check_no_overlap({span_of("logp", logp)}, {span_of("hidden", hidden), span_of("weight", hidden)}));
  expect_rejected([&] { check_no_overlap({span_of("logp", logp), span_of("lse", lse_on_logp)}, {}); },
                  "logp: shares memory with the output lse");
  expect_rejected([&] { check_no_overlap({span_of("grad_hidden", grad_hidden_in_last_row)}, {span_of("hidden", hidden)}); },
                  "grad_hidden: shares memory with the input hidden");
}

}  // namespace
}  // namespace shardjit
