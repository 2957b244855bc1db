// `shardjit-bench linear-logp-tp`: the tensor-parallel forward, one process per GPU. Each rank
// reports its time of the TP forward over the single-GPU forward of the whole vocabulary
// (timed on the same GPU, in the same process), and the combine step alone (all-gather of the
// partials + combine kernel).
#pragma once

#include <cstdint>
#include <string>

#include "gpu_timer.hpp"
#include "linear_logp_bench.hpp"

namespace shardjit::bench {

struct LinearLogpTpCase {
  LinearLogpCase tp_case;      // with tp > 1 (e.g. llama3-8b-16k-tp2)
  int tp = 2;
  LinearLogpCase single_case;  // the single-GPU baseline (e.g. llama3-8b-16k)
  std::int64_t combine_rows = 16384;
};

// The named cases of shapes.json; throws when a name is missing or the TP case has tp < 2.
LinearLogpTpCase load_linear_logp_tp_case(const std::string& shapes_path, const std::string& tp_name,
                                          const std::string& single_name);

// Forks one process per GPU; each prints one JSON object. Returns the exit status for main.
int run_linear_logp_tp_case(const LinearLogpTpCase& c, const TimingOptions& timing);

}  // namespace shardjit::bench
