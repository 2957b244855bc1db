#include "tools/cli/prewarm_tuning.hpp"

#include <string>

#include "runtime/tooling.hpp"
#include "shardjit/linear_logp.hpp"

namespace shardjit::cli {

TuningSummary tune_prewarmed(Runtime& runtime, const std::vector<PrewarmItem>& items, std::FILE* out) {
  TuningSummary summary;
  DeviceContext& device = tooling::device(runtime, 0);
  const std::string arch = device.arch();
  for (const PrewarmItem& item : items) {
    if (item.arch != arch) {
      summary.skipped += item.tunables.size();
      continue;
    }
    for (const TunableForward& tunable : item.tunables) {
      try {
        LinearLogpConfig config = tunable.config;
        config.device = 0;
        LinearLogp op(runtime, config);  // times the candidates unless a record exists
        const std::optional<TuningRecord> record = tooling::forward_tuning_record(runtime, config);
        if (!record) {
          std::fprintf(out, "tune %s: one candidate tile only, nothing to time\n", tunable.origin.c_str());
          continue;
        }
        std::string times;
        for (const auto& [name, ms] : record->times_ms) {
          char text[64];
          std::snprintf(text, sizeof text, "%s%s %.3f ms", times.empty() ? "" : ", ", name.c_str(), ms);
          times += text;
        }
        std::fprintf(out, "tune %s: %s (%s)\n", tunable.origin.c_str(), record->choice.c_str(), times.c_str());
        ++summary.tuned;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tune failed: %s: %s\n", tunable.origin.c_str(), e.what());
        ++summary.failed;
      }
    }
  }
  std::fflush(out);
  return summary;
}

}  // namespace shardjit::cli
