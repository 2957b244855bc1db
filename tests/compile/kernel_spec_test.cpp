#include <gtest/gtest.h>

#include "runtime/compile/kernel_spec.hpp"
#include "shardjit/error.hpp"

namespace shardjit {
namespace {

KernelSpec combine(std::int64_t peers, const char* targets = "int64", bool entropy = true) {
  return KernelSpec("logp_combine", {{"TargetT", TypeArg{targets}}, {"ENTROPY", entropy}, {"PEERS", peers}});
}

void expect_invalid(const std::function<void()>& make, const std::string& needle) {
  try {
    make();
    FAIL() << "expected an invalid-argument error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KernelSpec, CanonicalTextListsParametersInRegistryOrder) {
  EXPECT_EQ(combine(2).canonical_text(), "logp_combine<TargetT=int64,ENTROPY=true,PEERS=2>");
}

TEST(KernelSpec, NameExpressionSpellsTypesForTheTemplates) {
  EXPECT_EQ(combine(0, "int32", false).name_expression(), "shardjit::kernels::logp_combine<int, false, 0>");
}

TEST(KernelSpec, GivenOrderDoesNotMatter) {
  KernelSpec a("logp_combine", {{"PEERS", std::int64_t{4}}, {"ENTROPY", false}, {"TargetT", TypeArg{"int32"}}});
  EXPECT_EQ(a, combine(4, "int32", false));
}

TEST(KernelSpec, RejectsOutOfRangeValues) {
  expect_invalid([] { combine(-1); }, "PEERS");
  expect_invalid([] { combine(9); }, "0..8");
}

TEST(KernelSpec, RejectsTypesOutsideTheAllowedSet) {
  expect_invalid([] { combine(0, "fp32"); }, "expected one of int32, int64");
}

TEST(KernelSpec, RejectsMissingDuplicateAndUnknownParameters) {
  expect_invalid([] { KernelSpec("logp_combine", {{"PEERS", std::int64_t{0}}, {"ENTROPY", true}}); }, "TargetT is missing");
  expect_invalid([] {
    KernelSpec("logp_combine",
               {{"PEERS", std::int64_t{0}}, {"PEERS", std::int64_t{2}}, {"TargetT", TypeArg{"int32"}}, {"ENTROPY", true}});
  }, "given twice");
  expect_invalid([] {
    KernelSpec("logp_combine", {{"PEERS", std::int64_t{0}}, {"TargetT", TypeArg{"int32"}}, {"ENTROPY", true}, {"X", true}});
  }, "no parameter 'X'");
}

TEST(KernelSpec, RejectsAValueOfTheWrongKind) {
  expect_invalid([] { KernelSpec("logp_combine", {{"PEERS", true}, {"TargetT", TypeArg{"int32"}}, {"ENTROPY", true}}); },
                 "must be an integer");
}

TEST(KernelSpec, UnknownTemplateIsNotFound) {
  try {
    KernelSpec("no_such_kernel", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("logp_combine"), std::string::npos) << "lists the known templates";
  }
}

KernelSpec fwd_spec(std::int64_t hidden, std::int64_t v_local, std::int64_t v_valid, const char* type = "bf16") {
  return KernelSpec("linear_logp_fwd", {{"T", TypeArg{type}}, {"BiasT", TypeArg{"none"}}, {"TargetT", TypeArg{"int64"}},
                                        {"H", hidden}, {"V_LOCAL", v_local}, {"V_VALID", v_valid},
                                        {"BM", std::int64_t{128}}, {"BN", std::int64_t{128}}, {"BK", std::int64_t{64}},
                                        {"STAGES", std::int64_t{3}}, {"ENTROPY", false}});
}

KernelSpec fwd_hopper_spec(const char* type, std::int64_t bn) {
  return KernelSpec("linear_logp_fwd_hopper", {{"T", TypeArg{type}}, {"BiasT", TypeArg{"none"}},
                                               {"TargetT", TypeArg{"int64"}}, {"BM", std::int64_t{128}}, {"BN", bn},
                                               {"BK", std::int64_t{64}}, {"STAGES", std::int64_t{4}},
                                               {"ENTROPY", false}});
}

TEST(KernelSpec, FwdChecksConstraintsBetweenParameters) {
  EXPECT_NO_THROW(fwd_spec(4096, 128256, 128000));
  expect_invalid([] { fwd_spec(100, 300, 300); }, "multiple of 8");
  expect_invalid([] { fwd_spec(64, 300, 301); }, "exceeds V_LOCAL");
}

TEST(KernelSpec, TheHopperForwardTakesTwoTilesOf16BitInputsAndNoShape) {
  EXPECT_NO_THROW(fwd_hopper_spec("bf16", 256));
  EXPECT_NO_THROW(fwd_hopper_spec("fp16", 256));
  EXPECT_NO_THROW(fwd_hopper_spec("bf16", 128));
  expect_invalid([] { fwd_hopper_spec("bf16", 64); }, "BM x BN x BK = 128 x 64 x 64");
  expect_invalid([] { fwd_hopper_spec("fp32", 256); }, "expected one of");
  expect_invalid([] {
    KernelSpec("linear_logp_fwd_hopper", {{"T", TypeArg{"bf16"}}, {"BiasT", TypeArg{"none"}},
                                          {"TargetT", TypeArg{"int64"}}, {"H", std::int64_t{4096}},
                                          {"BM", std::int64_t{128}}, {"BN", std::int64_t{256}}, {"BK", std::int64_t{64}},
                                          {"STAGES", std::int64_t{4}}, {"ENTROPY", false}});
  }, "H");
}

KernelSpec fwd_rows_as_n_spec(const char* type, std::int64_t bm, std::int64_t stages = fwd_rows_as_n_stages(128),
                              std::int64_t bn = 128, bool keep = false) {
  return KernelSpec("linear_logp_fwd_rows_as_n", {{"T", TypeArg{type}}, {"BiasT", TypeArg{"none"}},
                                                  {"TargetT", TypeArg{"int64"}}, {"BM", bm}, {"BN", bn},
                                                  {"BK", std::int64_t{64}}, {"STAGES", std::int64_t{stages}},
                                                  {"ENTROPY", false}, {"KEEP", keep}});
}

// The heights wgmma_takes_n gives the forward's tiles of the rows as N; the parameter's range
// steps by 8 through heights without a kernel of their own.
TEST(KernelSpec, TheForwardOfTheRowsAsNTakesItsThreeHeights) {
  for (const std::int64_t bm : {136, 152, 168}) {
    EXPECT_NO_THROW(fwd_rows_as_n_spec("bf16", bm)) << bm;
    EXPECT_NO_THROW(fwd_rows_as_n_spec("fp16", bm)) << bm;
    EXPECT_NO_THROW(fwd_rows_as_n_spec("bf16", bm, fwd_rows_as_n_stages(128), 128, true)) << bm << ", keeping";
  }
  for (const std::int64_t bm : {144, 160}) {
    expect_invalid([bm] { fwd_rows_as_n_spec("bf16", bm); }, "BM one of 136, 152, 168");
  }
  expect_invalid([] { fwd_rows_as_n_spec("bf16", 128); }, "BM");
  expect_invalid([] { fwd_rows_as_n_spec("bf16", 152, 4); }, "STAGES");
}

// 256 columns on four stages (six would not fit), 128 on six; no other width.
TEST(KernelSpec, TheForwardOfTheRowsAsNTakes128Or256ColumnsOnTheirStages) {
  for (const std::int64_t bm : {136, 152, 168}) {
    EXPECT_NO_THROW(fwd_rows_as_n_spec("bf16", bm, 4, 256)) << bm;
    EXPECT_NO_THROW(fwd_rows_as_n_spec("fp16", bm, 4, 256)) << bm;
  }
  expect_invalid([] { fwd_rows_as_n_spec("bf16", 152, 6, 256); }, "expected STAGES = 4");
  expect_invalid([] { fwd_rows_as_n_spec("bf16", 152, 5, 256); }, "STAGES");
  expect_invalid([] { fwd_rows_as_n_spec("bf16", 152, 4, 192); }, "BN");
}

// The kernel that keeps the backward's chunk (KEEP) runs 128-column tiles only: its maxima go by
// 128 columns and the 256-column fold merges a row's lanes every tile (fwd_column_keep.cuh).
TEST(KernelSpec, TheForwardOfTheRowsAsNKeepsIn128ColumnTilesOnly) {
  for (const std::int64_t bm : {136, 152, 168}) {
    EXPECT_NO_THROW(fwd_rows_as_n_spec("fp16", bm, 6, 128, true)) << bm;
    EXPECT_NO_THROW(fwd_rows_as_n_spec("bf16", bm, 4, 256, false)) << bm;
    expect_invalid([bm] { fwd_rows_as_n_spec("bf16", bm, 4, 256, true); }, "KEEP with BN = 256");
  }
}

}  // namespace
}  // namespace shardjit
