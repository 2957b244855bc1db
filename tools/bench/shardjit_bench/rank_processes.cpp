#include "rank_processes.hpp"

#include <chrono>
#include <cstdio>
#include <vector>

#include "tools/rank_processes/rank_processes.hpp"

namespace shardjit::bench {

int run_rank_processes(int rank_count, const std::function<void(int, const CommUniqueId&)>& body) {
  // A benchmark at its largest sizes runs for minutes; the deadline only stops a rank that hangs.
  constexpr std::chrono::hours kDeadline{2};
  const std::vector<ranks::RankOutcome> outcomes = ranks::run_ranks(
      rank_count, [&](ranks::RankContext& rank) { body(rank.rank, rank.unique_id); }, kDeadline);
  if (ranks::all_ok(outcomes)) return 0;
  std::fprintf(stderr, "shardjit-bench ranks:%s\n", ranks::describe(outcomes).c_str());
  return 1;
}

}  // namespace shardjit::bench
