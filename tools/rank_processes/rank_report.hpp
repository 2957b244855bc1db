// Named byte blobs a rank process sends back to the process that forked it, and their wire
// format (length-prefixed key and value pairs), which travels through a pipe.
#pragma once

#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace shardjit::ranks {

class RankReport {
 public:
  void put_bytes(const std::string& key, const void* data, std::size_t bytes);
  template <class T>
  void put(const std::string& key, const std::vector<T>& values) {
    put_bytes(key, values.data(), values.size() * sizeof(T));
  }
  void put_text(const std::string& key, const std::string& text) { put_bytes(key, text.data(), text.size()); }

  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  const std::string& bytes(const std::string& key) const;  // throws std::out_of_range naming the key
  template <class T>
  std::vector<T> get(const std::string& key) const {
    const std::string& raw = bytes(key);
    std::vector<T> values(raw.size() / sizeof(T));
    std::memcpy(values.data(), raw.data(), values.size() * sizeof(T));
    return values;
  }
  std::string text(const std::string& key) const { return has(key) ? bytes(key) : std::string(); }

  std::string serialize() const;
  // Throws std::runtime_error on a truncated report (a rank that died while writing it).
  static RankReport parse(const std::string& wire);

 private:
  std::map<std::string, std::string> entries_;
};

}  // namespace shardjit::ranks
