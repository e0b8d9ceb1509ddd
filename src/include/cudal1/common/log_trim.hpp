// Trimming long compiler and runtime logs to what a person (or an LLM) needs to see.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace cudal1 {

// Keeps the first `head` and last `tail` bytes, with a note of what was cut between them.
// Cuts fall on line boundaries where one is near.
std::string trim_log(std::string_view text, std::size_t head = 2048, std::size_t tail = 6144);

// trim_log of a file's content; empty when the file is missing.
std::string trim_log_file(const std::filesystem::path& path, std::size_t head = 2048,
                          std::size_t tail = 6144);

// The text's first line, cut to `limit` characters with "..." after a cut: one line of a
// message for people.
std::string first_line(std::string_view text, std::size_t limit);

}  // namespace cudal1
