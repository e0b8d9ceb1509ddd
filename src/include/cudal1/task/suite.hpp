// A benchmark suite in KernelBench layout: DIR/level1/, DIR/level2/, ... each holding task files
// named <task_id>_<Name>.py. The same layout serves for a directory of solutions.
#pragma once

#include <compare>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cudal1 {

// A task's place in a suite: its level and its id within the level.
struct TaskRef {
  int level = 0;
  int id = 0;
  auto operator<=>(const TaskRef&) const = default;
};

// "level1/3"
std::string to_string(TaskRef ref);

// One file of a KernelBench-layout directory.
struct LayoutFile {
  TaskRef ref;
  std::string name;            // "3_GeluTanh": the file name without ".py"
  std::filesystem::path file;  // absolute, as found (a symbolic link is not resolved)
};

// Reads DIR/level<N>/<id>_<Name>.py. `role` ("suite", "solutions") names DIR in messages.
// Throws InputError when DIR is missing or not a directory, has no level<N>/ directory, holds a
// .py file whose name does not follow the layout or a broken link, or two files of one level
// share an id. Files whose names start with "." or "__" and entries that are not .py files are
// ignored. Sorted by level, then id.
std::vector<LayoutFile> scan_layout(const std::filesystem::path& dir, const std::string& role);

// "3_GeluTanh.py" -> {3, "3_GeluTanh"}; nullopt when the name does not follow the layout.
std::optional<std::pair<int, std::string>> parse_layout_file_name(const std::string& file_name);

struct SuiteTask {
  TaskRef ref;
  std::string name;            // "3_GeluTanh"
  std::filesystem::path file;  // absolute

  // "level1/3_GeluTanh": how results and messages name the task.
  std::string key() const;
};

struct Suite {
  std::filesystem::path root;    // absolute
  std::vector<SuiteTask> tasks;  // by level, then id

  // Throws InputError (see scan_layout; also for a suite without any task file).
  static Suite load(const std::filesystem::path& dir);

  const SuiteTask* find(TaskRef ref) const;
  std::vector<int> levels() const;  // the levels that hold tasks, ascending

  // The tasks of `levels` (every level when empty), then the first `limit` of them (all when 0).
  // Throws InputError when a requested level has no task in the suite.
  Suite select(const std::vector<int>& levels, std::size_t limit) const;
};

// Checks every task file statically (a worker parses it; nothing runs), `threads` at a time:
// a suite file that is not a task is unusable input, not a failed solution. Throws InputError
// "suite: <the first problem found>".
void check_task_formats(const Suite& suite, const std::filesystem::path& worker, unsigned threads);

// "1,2" -> {1, 2}. Throws InputError naming `option` for anything that is not a list of
// positive integers.
std::vector<int> parse_levels(const std::string& list, const std::string& option = "--levels");

}  // namespace cudal1
