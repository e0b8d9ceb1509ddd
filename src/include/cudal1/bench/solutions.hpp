// The solutions a benchmark evaluates: JSON lines {"level_id", "task_id", "custom_code", ...}
// (the form CUDA-L1 released its kernels in) or a directory in the suite's KernelBench layout.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/task/suite.hpp"

namespace cudal1::bench {

struct Solution {
  TaskRef task;
  // The candidate's source; nullopt for a null, empty or whitespace-only solution (it counts as
  // missing).
  std::optional<std::string> code;
  std::string origin;  // where it came from: "solutions.jsonl:7" or the file's path
};

struct SolutionSet {
  std::filesystem::path source;  // absolute
  std::map<TaskRef, Solution> solutions;

  // A directory (KernelBench layout) or a JSON-lines file. Throws InputError naming the file, the
  // line and the problem: a missing or unreadable file, invalid JSON, a line that is not an
  // object, a missing or malformed level_id/task_id/custom_code, two lines for one task, a file
  // without any solution.
  static SolutionSet load(const std::filesystem::path& path);
  // JSON lines from memory; `label` names the file in messages and origins.
  static SolutionSet parse_jsonl(std::string_view text, const std::string& label);

  const Solution* find(TaskRef ref) const;
};

// Solutions whose task is not in `suite`: reported as warnings, not errors, because a released
// solutions file covers every KernelBench task while a suite often holds fewer.
std::vector<const Solution*> unmatched_solutions(const SolutionSet& solutions, const Suite& suite);

}  // namespace cudal1::bench
