#include "fwd_plan_row.hpp"

#include "linear_logp/fwd_block_order.cuh"

namespace shardjit::bench {

nlohmann::json fwd_plan_row(const VocabSplit& plan, std::int64_t n_rows, std::int64_t row_bytes, int sm_count) {
  const int longest = plan.unit_pieces > 1 ? kernels::fwd_piece_tiles(plan.split_tiles(), plan.unit_pieces)
                                           : plan.split_tiles();
  return {{"splits", plan.splits},
          {"blocks", plan.blocks()},
          {"row_tiles", plan.row_tiles},
          {"longest_block_tiles", longest},
          {"merge", fwd_merges_in_kernel(n_rows, plan.tile_rows, plan.sources()) ? "kernel" : "combine"},
          {"tile_rows", plan.tile_rows},
          {"tile_cols", plan.tile_cols},
          {"rows_as_n", plan.rows_as_n ? plan.tile_rows : 0},
          {"model_time", fwd_plan_time(plan, sm_count, fwd_k_slices(row_bytes))}};
}

}  // namespace shardjit::bench
