#include "json_fields.hpp"

#include <fmt/format.h>

#include <fstream>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::report {

FieldReader::FieldReader(const nlohmann::json& object, std::string where)
    : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) {
    throw InputError(
        fmt::format("{}: expected a JSON object, found {}", where_, object_.type_name()));
  }
}

const nlohmann::json* FieldReader::find(const char* key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::fail(const char* key, const char* expected) const {
  const auto it = object_.find(key);
  const std::string found = it == object_.end() ? "nothing" : it->type_name();
  throw InputError(
      fmt::format("{}: field '{}' must be {}, found {}", where_, key, expected, found));
}

std::string FieldReader::text(const char* key) const {
  const auto* value = find(key);
  if (!value || !value->is_string()) fail(key, "a string");
  return value->get<std::string>();
}

std::int64_t FieldReader::integer(const char* key) const {
  const auto value = optional_integer(key);
  if (!value) fail(key, "an integer");
  return *value;
}

std::string FieldReader::text_or(const char* key, std::string fallback) const {
  const auto* value = find(key);
  if (!value) return fallback;
  if (!value->is_string()) fail(key, "a string or null");
  return value->get<std::string>();
}

std::optional<std::int64_t> FieldReader::optional_integer(const char* key) const {
  const auto* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_number_integer()) fail(key, "an integer or null");
  return value->get<std::int64_t>();
}

std::optional<double> FieldReader::number(const char* key) const {
  const auto* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_number()) fail(key, "a number or null");
  return value->get<double>();
}

bool FieldReader::boolean_or(const char* key, bool fallback) const {
  const auto* value = find(key);
  if (!value) return fallback;
  if (!value->is_boolean()) fail(key, "true, false or null");
  return value->get<bool>();
}

std::optional<std::array<double, 2>> FieldReader::interval(const char* key) const {
  const auto* value = find(key);
  if (!value) return std::nullopt;
  if (!value->is_array() || value->size() != 2 || !(*value)[0].is_number() ||
      !(*value)[1].is_number())
    fail(key, "[low, high] (two numbers) or null");
  return std::array<double, 2>{(*value)[0].get<double>(), (*value)[1].get<double>()};
}

std::vector<std::string> FieldReader::strings(const char* key) const {
  const auto* value = find(key);
  std::vector<std::string> out;
  if (!value) return out;
  if (!value->is_array()) fail(key, "a list of strings");
  for (const auto& item : *value) {
    if (!item.is_string()) fail(key, "a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

nlohmann::json FieldReader::object_or_empty(const char* key) const {
  const auto* value = find(key);
  if (!value) return nlohmann::json::object();
  if (!value->is_object()) fail(key, "an object");
  return *value;
}

namespace {

std::string read_result_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InputError(fmt::format("'{}' does not exist or is not a file", path.string()));
  }
  try {
    return read_file(path);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("cannot read '{}': {}", path.string(), e.what()));
  }
}

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& path) {
  const std::string text = read_result_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(fmt::format("'{}' is not valid JSON: {}", path.string(), e.what()));
  }
}

std::vector<std::pair<std::size_t, nlohmann::json>> read_json_lines(
    const std::filesystem::path& path) {
  const std::string text = read_result_file(path);
  std::vector<std::pair<std::size_t, nlohmann::json>> out;
  std::size_t line_number = 0, start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line(text.data() + start, end - start);
    ++line_number;
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(
          fmt::format("'{}' line {} is not valid JSON: {}", path.string(), line_number, e.what()));
    }
    if (!value.is_object()) {
      throw InputError(fmt::format("'{}' line {}: expected a JSON object, found {}", path.string(),
                                   line_number, value.type_name()));
    }
    out.emplace_back(line_number, std::move(value));
  }
  return out;
}

}  // namespace cudal1::report
