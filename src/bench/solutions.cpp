#include "cudal1/bench/solutions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

std::optional<std::string> usable_code(std::string code) {
  if (blank(code)) return std::nullopt;
  return code;
}

// level_id / task_id: a non-negative integer, or a string of digits.
int read_id(const json& line, const char* field, const std::string& where) {
  if (!line.contains(field)) throw InputError(fmt::format("{}: no \"{}\"", where, field));
  const json& value = line[field];
  if (value.is_number_unsigned()) {
    const auto id = value.get<std::uint64_t>();
    if (id <= 1'000'000'000) return static_cast<int>(id);
  } else if (value.is_string()) {
    const std::string text = value.get<std::string>();
    int id = 0;
    const auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (error == std::errc() && stop == text.data() + text.size() && !text.empty() && id >= 0)
      return id;
  }
  throw InputError(
      fmt::format("{}: \"{}\" must be a non-negative integer, got {}", where, field, value.dump()));
}

}  // namespace

SolutionSet SolutionSet::parse_jsonl(std::string_view text, const std::string& label) {
  SolutionSet set;
  std::map<TaskRef, std::size_t> first_line;
  std::size_t number = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++number;
    if (blank(raw)) continue;
    const std::string where = fmt::format("{}:{}", label, number);
    json line;
    try {
      line = json::parse(raw);
    } catch (const json::parse_error& e) {
      throw InputError(fmt::format("{}: not valid JSON ({})", where, e.what()));
    }
    if (!line.is_object()) {
      throw InputError(
          fmt::format("{}: expected a JSON object with level_id, task_id and custom_code, got {}",
                      where, std::string(line.type_name())));
    }
    Solution solution;
    solution.task = {read_id(line, "level_id", where), read_id(line, "task_id", where)};
    solution.origin = where;
    if (!line.contains("custom_code")) {
      throw InputError(fmt::format(
          "{}: no \"custom_code\" (write \"custom_code\": null for a task without a solution)",
          where));
    }
    const json& code = line["custom_code"];
    if (code.is_string()) {
      solution.code = usable_code(code.get<std::string>());
    } else if (!code.is_null()) {
      throw InputError(fmt::format("{}: \"custom_code\" must be a string or null, got {}", where,
                                   std::string(code.type_name())));
    }
    const auto [earlier, inserted] = first_line.emplace(solution.task, number);
    if (!inserted) {
      throw InputError(
          fmt::format("{}: a second solution for level {} task {} (the first is on "
                      "line {})",
                      where, solution.task.level, solution.task.id, earlier->second));
    }
    set.solutions.emplace(solution.task, std::move(solution));
  }
  if (set.solutions.empty()) {
    throw InputError(
        fmt::format("the solutions file '{}' holds no solution (one JSON object per "
                    "line: level_id, task_id, custom_code)",
                    label));
  }
  return set;
}

SolutionSet SolutionSet::load(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw InputError(fmt::format("the solutions '{}' do not exist", path.string()));
  }
  SolutionSet set;
  if (fs::is_directory(path, ec)) {
    for (const LayoutFile& file : scan_layout(path, "solutions")) {
      std::string code;
      try {
        code = read_file(file.file);
      } catch (const std::exception& e) {
        throw InputError(
            fmt::format("cannot read the solution '{}': {}", file.file.string(), e.what()));
      }
      set.solutions.emplace(file.ref,
                            Solution{file.ref, usable_code(std::move(code)), file.file.string()});
    }
    if (set.solutions.empty()) {
      throw InputError(fmt::format("the solutions directory '{}' holds no <task_id>_<Name>.py file",
                                   path.string()));
    }
  } else {
    std::string text;
    try {
      text = read_file(path);
    } catch (const std::exception& e) {
      throw InputError(
          fmt::format("cannot read the solutions file '{}': {}", path.string(), e.what()));
    }
    set = parse_jsonl(text, path.string());
  }
  set.source = fs::absolute(path).lexically_normal();
  if (!set.source.has_filename()) set.source = set.source.parent_path();
  return set;
}

const Solution* SolutionSet::find(TaskRef ref) const {
  const auto found = solutions.find(ref);
  return found == solutions.end() ? nullptr : &found->second;
}

std::vector<const Solution*> unmatched_solutions(const SolutionSet& solutions, const Suite& suite) {
  std::vector<const Solution*> unmatched;
  for (const auto& [ref, solution] : solutions.solutions) {
    if (suite.find(ref) == nullptr) unmatched.push_back(&solution);
  }
  return unmatched;
}

}  // namespace cudal1::bench
