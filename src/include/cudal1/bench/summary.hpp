// OUT/summary.json: statistics over a benchmark's result lines, overall, per level and per
// baseline (format in docs/bench.md), and its table for people.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cudal1::bench {

struct SummaryContext {
  std::filesystem::path suite;
  std::filesystem::path solutions;
  nlohmann::json device = "cpu";  // used when no verdict names its device
  std::string torch;
  // How outputs were compared (Tolerance::to_json): results are comparable only under one.
  nlohmann::json tolerance = nlohmann::json::object();
  std::vector<std::string> baselines;              // requested, eager first
  std::map<std::string, std::string> unavailable;  // baselines that cannot run here, and why
  std::vector<std::string> unmatched_solutions;    // solutions for tasks not in the suite
  nlohmann::json throughput = nlohmann::json::object();
  std::string created_at;  // ISO 8601 UTC; now when empty
};

// `lines`: one result line per selected task.
nlohmann::json make_summary(const std::vector<nlohmann::json>& lines,
                            const SummaryContext& context);

// Levels x statistics, baselines, rejected and degenerate tasks: for stdout.
std::string format_summary(const nlohmann::json& summary);

// Now as "2026-11-22T10:00:00Z".
std::string utc_timestamp();

}  // namespace cudal1::bench
