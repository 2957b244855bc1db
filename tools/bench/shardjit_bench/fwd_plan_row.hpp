// A forward plan as a benchmark row shows it: the dry run's plans of a sweep point and the plan a
// timed forward ran, in one form, so that a measured time sits beside what the rule chose and
// what its cost model expected.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "runtime/ops/linear_logp/fwd.hpp"

namespace shardjit::bench {

// The plan of a call of `n_rows` rows of `row_bytes` bytes on `sm_count` multiprocessors: its
// tile (tile_rows x tile_cols; rows_as_n: the tile's rows where it takes the rows as N, else 0),
// splits, blocks, row tiles, the vocabulary tiles of the longest block, where the partials are
// merged (in the forward kernel or a combine kernel: fwd_merges_in_kernel), and model_time, the
// plan's time in 128 x 256 tile times (fwd_plan_time): two plans of one point compare by it.
nlohmann::json fwd_plan_row(const VocabSplit& plan, std::int64_t n_rows, std::int64_t row_bytes, int sm_count);

}  // namespace shardjit::bench
