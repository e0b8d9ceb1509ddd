// `cudal1 bench compare`: two result sets of the same suite side by side (the same kernels on
// two GPU types, two solution sets on one GPU): per-task ratios B/A and aggregates.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/task/suite.hpp"

namespace cudal1::bench {

struct ResultSet {
  std::filesystem::path summary_file;
  nlohmann::json summary;
  std::map<TaskRef, nlohmann::json> lines;  // from results.jsonl beside summary.json

  // OUT/summary.json or the directory OUT. Throws InputError naming the file when the summary is
  // missing or not a benchmark summary; results.jsonl may be absent (aggregates only).
  static ResultSet load(const std::filesystem::path& path);
};

// {"a", "b", "tasks": [{"task", "level", "task_id", "a", "b", "speedup_ratio",
//  "candidate_ms_ratio", "reference_ms_ratio"}], "only_in_a", "only_in_b",
//  "aggregate": {"tasks_in_both", "ok_in_both", "status_changed", "geomean_speedup_ratio",
//  "geomean_candidate_ms_ratio", "geomean_reference_ms_ratio", "overall", "levels"}}
// Ratios are B / A; aggregate geometric means are over the tasks ok on both sides.
nlohmann::json compare_result_sets(const ResultSet& a, const ResultSet& b);

// The comparison as a table for people.
std::string format_comparison(const nlohmann::json& comparison);

}  // namespace cudal1::bench
