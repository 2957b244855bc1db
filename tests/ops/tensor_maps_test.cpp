// The host side of the TMA maps (runtime/ops/tensor_maps.cpp), decided before the driver is asked,
// so it runs on the CPU: the GEMM's addend map, which an addend TMA cannot describe (a base or a
// row stride that is not a multiple of 16 bytes) or no addend at all leaves unencoded, the kernel
// on its global reads; and the rows of the box of an operand's last row tile (tail_box_rows).
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/ops/tensor_maps.hpp"

namespace shardjit {
namespace {

kernels::GemmParams params_with_addend(std::uintptr_t address, long long stride) {
  kernels::GemmParams params{};
  params.args.addend = reinterpret_cast<const void*>(address);
  params.args.addend_stride = stride;
  params.args.m = 300;
  params.args.n = 512;
  return params;
}

TEST(TensorMaps, AddendsTmaCannotDescribeStayOnGlobalReads) {
  kernels::GemmParams none{};
  EXPECT_FALSE(encode_gemm_addend_map(none, DType::kFP32, 128)) << "no addend";
  kernels::GemmParams misaligned_base = params_with_addend(0x10008, 512);
  EXPECT_FALSE(encode_gemm_addend_map(misaligned_base, DType::kFP32, 128));
  kernels::GemmParams odd_stride = params_with_addend(0x10000, 513);
  EXPECT_FALSE(encode_gemm_addend_map(odd_stride, DType::kFP32, 128)) << "513 x 4 bytes a row";
  kernels::GemmParams odd_stride_bf16 = params_with_addend(0x10000, 516);
  EXPECT_FALSE(encode_gemm_addend_map(odd_stride_bf16, DType::kBF16, 128)) << "516 x 2 bytes a row";
}

// The last row tile's rows rounded up to 8 (a call of fewer rows than a tile: its rows); a whole
// last tile keeps the tile's box.
TEST(TensorMaps, TheLastRowTileIsReadInABoxOfItsRowsRoundedUpToEight) {
  EXPECT_EQ(tail_box_rows(0, 128), 8);
  EXPECT_EQ(tail_box_rows(1, 128), 8);
  EXPECT_EQ(tail_box_rows(7, 128), 8);
  EXPECT_EQ(tail_box_rows(8, 128), 8);
  EXPECT_EQ(tail_box_rows(65, 128), 72);
  EXPECT_EQ(tail_box_rows(121, 128), 128);
  EXPECT_EQ(tail_box_rows(127, 128), 128);
  EXPECT_EQ(tail_box_rows(128, 128), 128);
  EXPECT_EQ(tail_box_rows(129, 128), 8);
  EXPECT_EQ(tail_box_rows(150, 128), 24);
  EXPECT_EQ(tail_box_rows(256, 128), 128);
  EXPECT_EQ(tail_box_rows(300, 128), 48);
  EXPECT_EQ(tail_box_rows(333, 128), 80);
  EXPECT_EQ(tail_box_rows(4097, 128), 8);
  EXPECT_EQ(tail_box_rows(300, 168), 136);
  EXPECT_EQ(tail_box_rows(333, 168), 168);
  EXPECT_EQ(tail_box_rows(150, 168), 152);
  EXPECT_EQ(tail_box_rows(333, 192), 144);
}

}  // namespace
}  // namespace shardjit
