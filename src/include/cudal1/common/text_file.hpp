// Reading user-supplied source files with a clear error for everything that cannot be one.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace cudal1 {

// Returns the byte offset of the first invalid UTF-8 sequence, or nullopt if `text` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// Replaces each byte that is not part of valid UTF-8 with '?'.
std::string sanitize_utf8(std::string_view text);

// Reads a Python source file. Throws InputError naming `role` ("task", "candidate") and the path
// when the file is missing, a directory, unreadable, empty (or only whitespace) or not UTF-8.
std::string read_source_file(const std::filesystem::path& path, std::string_view role);

// Reads a whole file; throws std::runtime_error when it cannot.
std::string read_file(const std::filesystem::path& path);

// Writes a file atomically (temporary file in the same directory, then rename).
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace cudal1
