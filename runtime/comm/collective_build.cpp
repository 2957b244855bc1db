#include "runtime/comm/collective_build.hpp"

#include <algorithm>
#include <cstring>

namespace shardjit {
namespace {

// The record agree_on_outcome exchanges.
constexpr std::size_t kOutcomeMessageBytes = 320;
struct Outcome {
  std::int32_t failed;
  std::int32_t code;  // ErrorCode of the failure
  char message[kOutcomeMessageBytes];
};

}  // namespace

std::vector<std::string> exchange_text(Communicator::Impl& comm, const std::string& mine, std::size_t max_bytes,
                                       const char* what) {
  std::vector<char> record(max_bytes, '\0');
  std::memcpy(record.data(), mine.data(), std::min(mine.size(), max_bytes));
  const std::vector<std::byte> bytes = comm.exchange(record.data(), max_bytes, what);
  std::vector<std::string> texts;
  for (int r = 0; r < comm.size; ++r) {
    const char* text = reinterpret_cast<const char*>(bytes.data()) + static_cast<std::size_t>(r) * max_bytes;
    texts.emplace_back(text, strnlen(text, max_bytes));
  }
  return texts;
}

void agree_on_outcome(Communicator::Impl& comm, const std::optional<Error>& mine, const std::string& what) {
  Outcome outcome;
  std::memset(&outcome, 0, sizeof(outcome));
  if (mine) {
    const std::string message = mine->what();
    outcome.failed = 1;
    outcome.code = static_cast<std::int32_t>(mine->code());
    std::memcpy(outcome.message, message.data(), std::min(message.size(), sizeof(outcome.message) - 1));
  }
  const std::vector<Outcome> all = exchange_records(comm, outcome, what.c_str());
  std::string failures;
  ErrorCode code = ErrorCode::kOk;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].failed == 0) continue;
    if (code == ErrorCode::kOk) code = static_cast<ErrorCode>(all[r].code);
    failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + ": " +
                std::string(all[r].message, strnlen(all[r].message, sizeof(all[r].message)));
  }
  if (!failures.empty()) throw Error(code, what + " failed on some rank, so no rank keeps the op (" + failures + ")");
}

}  // namespace shardjit
