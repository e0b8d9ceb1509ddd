// The lines of OUT/results.jsonl: one per suite task, with the eager verdict's headline fields,
// an entry per baseline, and the full verdict (format in docs/bench.md).
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/bench/score_statistics.hpp"
#include "cudal1/eval/verdict.hpp"
#include "cudal1/task/suite.hpp"

namespace cudal1::bench {

// Status of a task without a usable solution (none, null, or empty).
inline constexpr const char* kMissing = "missing";
// Status of a baseline entry that could not run (the reason says why).
inline constexpr const char* kUnavailable = "unavailable";
// Task flag of a task whose own code failed (the suite's fault, not the solution's).
inline constexpr const char* kTaskError = "task_error";

// The solution that was evaluated: its copy under OUT and the SHA-256 of its code (a re-run
// evaluates a task again when its code changed).
struct EvaluatedSolution {
  std::filesystem::path file;
  std::string sha256;
};

// A line for a task evaluated against the eager reference; `baselines` holds an entry per
// baseline, eager included.
nlohmann::json result_line(const SuiteTask& task, const EvaluatedSolution& solution,
                           const Verdict& eager, const nlohmann::json& baselines);
// A line for a task without a solution; `why` says which case ("no solution in ...").
nlohmann::json missing_line(const SuiteTask& task, const std::string& why,
                            const nlohmann::json& baselines);

// Baseline entries. A timed one: {"status", "speedup", "speedup_ci", "baseline_ms",
// "candidate_ms"}, plus "flags" and "error" when not empty.
nlohmann::json baseline_entry(const Verdict& verdict);
nlohmann::json unavailable_entry(const std::string& reason);
// For a solution that failed against the eager reference: the same status, not timed again.
nlohmann::json untimed_entry(const std::string& status, const std::string& reason);

// The statistics' view of a line (main status) or of one of its baseline entries (nullopt when
// the line has no entry for that baseline).
TaskScore score_of(const nlohmann::json& line);
std::optional<TaskScore> baseline_score_of(const nlohmann::json& line, const std::string& baseline);

// "level1/3_GeluTanh" for a result line.
std::string result_key(const nlohmann::json& line);

}  // namespace cudal1::bench
