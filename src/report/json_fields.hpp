// Reading fields of result files with errors that name the file, the line and the field.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::report {

// Where a JSON object came from, for messages: "results.jsonl line 4" of a directory.
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string where);

  // Required fields: InputError when absent or of another type.
  std::string text(const char* key) const;
  std::int64_t integer(const char* key) const;

  // Optional fields: absent or null gives the fallback / nullopt; another type is an InputError.
  std::string text_or(const char* key, std::string fallback) const;
  std::optional<std::int64_t> optional_integer(const char* key) const;
  std::optional<double> number(const char* key) const;
  bool boolean_or(const char* key, bool fallback) const;
  std::optional<std::array<double, 2>> interval(const char* key) const;  // [low, high]
  std::vector<std::string> strings(const char* key) const;
  nlohmann::json object_or_empty(const char* key) const;

 private:
  const nlohmann::json* find(const char* key) const;  // null when absent or null
  [[noreturn]] void fail(const char* key, const char* expected) const;

  const nlohmann::json& object_;
  std::string where_;
};

// Parses a whole JSON file; InputError names the file for a missing file or bad JSON.
nlohmann::json read_json_file(const std::filesystem::path& path);

// Parses a JSON Lines file (blank lines skipped), each line an object; InputError names the file
// and line. Returns the objects with their 1-based line numbers.
std::vector<std::pair<std::size_t, nlohmann::json>> read_json_lines(
    const std::filesystem::path& path);

}  // namespace cudal1::report
