// Inputs and labels shared by the benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "shardjit/dtype.hpp"

namespace shardjit::bench {

// Uniform random device memory of `count` elements of `dtype` in [-scale, scale], made on all
// cores (never zeros: zeros run faster than real data). Free with cudaFree.
void* random_device(std::size_t count, DType dtype, float scale, std::uint64_t seed);

// Today's date (UTC), "YYYY-MM-DD", for the result records.
std::string today();

}  // namespace shardjit::bench
