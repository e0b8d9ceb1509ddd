#include "cudal1/task/suite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

#include "cudal1/common/error.hpp"
#include "cudal1/task/source_check.hpp"

namespace cudal1 {
namespace {

namespace fs = std::filesystem;

std::optional<int> parse_positive(const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || text.empty() || value < 0) return std::nullopt;
  return value;
}

// Level directories of `dir`, by level: "level1" -> 1.
std::map<int, fs::path> level_directories(const fs::path& dir) {
  static const std::regex kLevel("level([0-9]{1,6})");
  std::map<int, fs::path> levels;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !std::regex_match(name, match, kLevel)) continue;
    levels[std::stoi(match[1].str())] = entry.path();
  }
  return levels;
}

std::vector<LayoutFile> scan_level(int level, const fs::path& dir) {
  std::map<int, LayoutFile> by_id;
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(dir)) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  for (const fs::path& path : entries) {
    const std::string file_name = path.filename().string();
    if (path.extension() != ".py" || file_name.starts_with(".") || file_name.starts_with("__"))
      continue;
    std::error_code ec;
    if (fs::is_symlink(path, ec) && !fs::exists(path, ec)) {
      throw InputError(fmt::format("'{}' is a broken symbolic link (to '{}')", path.string(),
                                   fs::read_symlink(path, ec).string()));
    }
    if (fs::is_directory(path, ec)) continue;
    const auto parsed = parse_layout_file_name(file_name);
    if (!parsed) {
      throw InputError(
          fmt::format("'{}' does not follow the KernelBench layout: task files are named "
                      "<task_id>_<Name>.py (for example 3_GeluTanh.py)",
                      path.string()));
    }
    const auto [id, name] = *parsed;
    LayoutFile file{{level, id}, name, fs::absolute(path)};
    const auto [found, inserted] = by_id.emplace(id, file);
    if (!inserted) {
      throw InputError(fmt::format("'{}' and '{}' both have task id {} in level {}",
                                   found->second.file.string(), file.file.string(), id, level));
    }
  }
  std::vector<LayoutFile> files;
  for (auto& [id, file] : by_id) files.push_back(std::move(file));
  return files;
}

}  // namespace

std::string to_string(TaskRef ref) {
  return fmt::format("level{}/{}", ref.level, ref.id);
}

std::optional<std::pair<int, std::string>> parse_layout_file_name(const std::string& file_name) {
  static const std::regex kTaskFile("([0-9]{1,9})_(.+)\\.py");
  std::smatch match;
  if (!std::regex_match(file_name, match, kTaskFile)) return std::nullopt;
  const auto id = parse_positive(match[1].str());
  if (!id) return std::nullopt;
  return std::make_pair(*id, file_name.substr(0, file_name.size() - 3));
}

std::vector<LayoutFile> scan_layout(const fs::path& dir, const std::string& role) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    throw InputError(fmt::format("the {} directory '{}' does not exist", role, dir.string()));
  }
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("the {} '{}' is not a directory", role, dir.string()));
  }
  const auto levels = level_directories(dir);
  if (levels.empty()) {
    throw InputError(fmt::format(
        "the {} directory '{}' has no level directories: expected level1/, level2/, level3/ "
        "holding <task_id>_<Name>.py files (KernelBench layout)",
        role, dir.string()));
  }
  std::vector<LayoutFile> files;
  for (const auto& [level, path] : levels) {
    auto found = scan_level(level, path);
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string SuiteTask::key() const {
  return fmt::format("level{}/{}", ref.level, name);
}

Suite Suite::load(const fs::path& dir) {
  Suite suite;
  suite.root = fs::absolute(dir).lexically_normal();
  if (!suite.root.has_filename()) suite.root = suite.root.parent_path();
  for (const LayoutFile& file : scan_layout(dir, "suite")) {
    suite.tasks.push_back({file.ref, file.name, file.file});
  }
  if (suite.tasks.empty()) {
    throw InputError(
        fmt::format("the suite '{}' has level directories but no task files (<task_id>_<Name>.py)",
                    dir.string()));
  }
  return suite;
}

const SuiteTask* Suite::find(TaskRef ref) const {
  const auto found = std::find_if(tasks.begin(), tasks.end(),
                                  [ref](const SuiteTask& task) { return task.ref == ref; });
  return found == tasks.end() ? nullptr : &*found;
}

std::vector<int> Suite::levels() const {
  std::set<int> levels;
  for (const auto& task : tasks) levels.insert(task.ref.level);
  return {levels.begin(), levels.end()};
}

Suite Suite::select(const std::vector<int>& wanted, std::size_t limit) const {
  const std::vector<int> present = levels();
  for (int level : wanted) {
    if (std::find(present.begin(), present.end(), level) == present.end()) {
      throw InputError(
          fmt::format("--levels: the suite '{}' has no task in level{}/", root.string(), level));
    }
  }
  Suite selected{root, {}};
  for (const auto& task : tasks) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), task.ref.level) == wanted.end())
      continue;
    if (limit > 0 && selected.tasks.size() >= limit) break;
    selected.tasks.push_back(task);
  }
  return selected;
}

std::vector<int> parse_levels(const std::string& list, const std::string& option) {
  std::vector<int> levels;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    const auto level = parse_positive(item);
    if (!level || *level == 0) {
      throw InputError(fmt::format("{} '{}': expected a comma-separated list of levels such as 1,2",
                                   option, list));
    }
    if (std::find(levels.begin(), levels.end(), *level) == levels.end()) levels.push_back(*level);
    start = comma + 1;
  }
  return levels;
}

void check_task_formats(const Suite& suite, const std::filesystem::path& worker, unsigned threads) {
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::optional<InputError> first_error;
  std::exception_ptr internal;
  auto check = [&] {
    for (std::size_t i = next++; i < suite.tasks.size(); i = next++) {
      try {
        require_task_format(inspect_source(suite.tasks[i].file, "task", worker));
      } catch (const InputError& e) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = e;
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!internal) internal = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, threads); ++t) pool.emplace_back(check);
  for (auto& thread : pool) thread.join();
  if (first_error) throw InputError(fmt::format("suite: {}", first_error->what()));
  if (internal) std::rethrow_exception(internal);
}

}  // namespace cudal1
