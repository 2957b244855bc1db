#include "tools/rank_processes/rank_report.hpp"

#include <cstdint>
#include <stdexcept>

namespace shardjit::ranks {
namespace {

void append_u64(std::string& out, std::uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

std::uint64_t read_u64(const std::string& in, std::size_t& at) {
  if (at + 8 > in.size()) throw std::runtime_error("truncated rank report");
  std::uint64_t value = 0;
  std::memcpy(&value, in.data() + at, 8);
  at += 8;
  return value;
}

}  // namespace

void RankReport::put_bytes(const std::string& key, const void* data, std::size_t bytes) {
  entries_[key] = std::string(static_cast<const char*>(data), bytes);
}

const std::string& RankReport::bytes(const std::string& key) const {
  auto found = entries_.find(key);
  if (found == entries_.end()) throw std::out_of_range("rank report has no '" + key + "'");
  return found->second;
}

std::string RankReport::serialize() const {
  std::string out;
  for (const auto& [key, value] : entries_) {
    append_u64(out, key.size());
    out += key;
    append_u64(out, value.size());
    out += value;
  }
  return out;
}

RankReport RankReport::parse(const std::string& wire) {
  RankReport report;
  std::size_t at = 0;
  while (at < wire.size()) {
    const std::uint64_t key_size = read_u64(wire, at);
    if (at + key_size > wire.size()) throw std::runtime_error("truncated rank report");
    std::string key = wire.substr(at, key_size);
    at += key_size;
    const std::uint64_t value_size = read_u64(wire, at);
    if (at + value_size > wire.size()) throw std::runtime_error("truncated rank report");
    report.entries_[key] = wire.substr(at, value_size);
    at += value_size;
  }
  return report;
}

}  // namespace shardjit::ranks
