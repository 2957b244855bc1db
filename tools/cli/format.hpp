// How the tool writes sizes and times for people (tables) and for programs (JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace shardjit::cli {

// "812 B", "23.4 KiB", "1.2 GiB".
std::string format_bytes(std::uint64_t bytes);

// Local time: "2025-01-31 14:05:09" for tables, "2025-01-31T14:05:09+0100" (ISO 8601) for JSON.
std::string format_local_time(std::filesystem::file_time_type time, bool iso);

// `text` padded with spaces to `width` characters.
std::string pad(const std::string& text, std::size_t width);

}  // namespace shardjit::cli
