// A `cudal1 bench` output directory read back: OUT/summary.json and OUT/results.jsonl.
#pragma once

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/report/run_directory.hpp"

namespace cudal1::report {

// One line of results.jsonl: the verdict of a suite task's solution (status "missing" when the
// solutions directory had none).
struct TaskResult {
  int level = 0;
  std::optional<int> task_id;
  std::string name;  // e.g. "3_GeluTanh"
  std::string status;
  bool correct = false;
  std::optional<double> speedup;
  std::optional<std::array<double, 2>> speedup_ci;
  std::optional<double> reward;
  std::optional<double> reference_ms;
  std::optional<double> candidate_ms;
  // The candidate's profile (its verdict's): the share of the memory roof its calls reach and
  // where its time goes.
  std::optional<double> roof;
  std::string profile_summary;
  std::vector<std::string> flags;
  std::vector<std::string> task_flags;
  std::string error;
  nlohmann::json baselines = nlohmann::json::object();  // {"eager": {...}, "compile": {...}}
  SourceFile task;                                      // the reference (task_file)
  SourceFile solution;  // the candidate (solution_file), none for missing tasks

  bool degenerate() const;
  // status ok with a speedup: the tasks whose speedups the statistics describe.
  bool verified() const { return status == "ok" && correct && speedup.has_value(); }
};

struct BenchRun {
  std::filesystem::path dir;
  nlohmann::json summary;  // summary.json as written (overall, levels, rejected, baselines, ...)
  std::vector<TaskResult> tasks;

  std::vector<int> levels() const;  // the levels present, ascending
};

// Throws InputError naming the file (and line) for anything unreadable or of the wrong shape.
// A task file that is not where results.jsonl says is looked for as
// SUITE/level<L>/<file name>, SUITE being `suite` when given, else summary.json's suite; a
// solution likewise under DIR/solutions/level<L>/.
BenchRun load_bench_run(const std::filesystem::path& dir,
                        const std::optional<std::filesystem::path>& suite = std::nullopt);

}  // namespace cudal1::report
