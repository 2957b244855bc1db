// Steps of a collective op build that every rank must come out of alike: texts exchanged once
// (configs compared on every rank with the same code), and local steps whose outcome is agreed
// on, so that a failure on one rank becomes the same error on every rank instead of a rank that
// keeps an op whose peers have none (and later waits for them forever).
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/comm/communicator_impl.hpp"
#include "shardjit/error.hpp"

namespace shardjit {

// Every rank's fixed-size record, in rank order. Waits on the host, bounded.
template <class Record>
std::vector<Record> exchange_records(Communicator::Impl& comm, const Record& mine, const char* what) {
  static_assert(std::is_trivially_copyable_v<Record>, "records travel as bytes");
  const std::vector<std::byte> bytes = comm.exchange(&mine, sizeof(mine), what);
  std::vector<Record> all(static_cast<std::size_t>(comm.size));
  std::memcpy(all.data(), bytes.data(), all.size() * sizeof(Record));
  return all;
}

// Every rank's `mine` (cut to max_bytes), in rank order. Waits on the host, bounded.
std::vector<std::string> exchange_text(Communicator::Impl& comm, const std::string& mine, std::size_t max_bytes,
                                       const char* what);

// Tells every rank how every rank's step went; if any failed, throws on every rank one Error
// with the first failing rank's code, naming `what` and each failing rank's message.
void agree_on_outcome(Communicator::Impl& comm, const std::optional<Error>& mine, const std::string& what);

// Runs `step` here, then agree_on_outcome: every rank returns, or every rank throws.
template <class Step>
void run_on_every_rank(Communicator::Impl& comm, const std::string& what, Step&& step) {
  std::optional<Error> failure;
  try {
    step();
  } catch (const Error& e) {
    failure.emplace(e.code(), e.what());
  } catch (const std::exception& e) {
    failure.emplace(ErrorCode::kInternal, e.what());
  }
  agree_on_outcome(comm, failure, what);
}

}  // namespace shardjit
