// Inputs and labels shared by the benchmarks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shardjit/dtype.hpp"

namespace shardjit::bench {

// Uniform random device memory of `count` elements of `dtype` in [-scale, scale], made on all
// cores (never zeros: zeros run faster than real data). Free with cudaFree.
void* random_device(std::size_t count, DType dtype, float scale, std::uint64_t seed);

// One random buffer of a set of rotating inputs: `count` elements in [-scale, scale].
struct InputSpec {
  std::size_t count;
  float scale;
  std::uint64_t seed;  // of the first set; set i takes seed + 1000 i
};

// Sets of random input buffers (one buffer per spec) that calls take in turn, as many as make
// the sets together larger than L2 (160 MiB, at most 8 sets): repeated reads of one small set
// would time the cache. Where one set is that large there is one set.
class RotatingInputs {
 public:
  RotatingInputs(const std::vector<InputSpec>& specs, DType dtype);
  ~RotatingInputs();
  RotatingInputs(const RotatingInputs&) = delete;
  RotatingInputs& operator=(const RotatingInputs&) = delete;

  // The next set's buffers, in the order of the specs.
  const std::vector<void*>& next() { return set(turn_++); }
  // The buffers of set `turn` (modulo the sets): for a caller that keeps its own turns, so that
  // two works interleaved on the same inputs each go through every set.
  const std::vector<void*>& set(std::size_t turn) const { return sets_[turn % sets_.size()]; }
  std::size_t sets() const { return sets_.size(); }

 private:
  std::vector<std::vector<void*>> sets_;
  std::size_t turn_ = 0;
};

// Today's date (UTC), "YYYY-MM-DD", for the result records.
std::string today();

}  // namespace shardjit::bench
