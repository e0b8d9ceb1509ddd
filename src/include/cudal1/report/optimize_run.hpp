// A `cudal1 optimize` run directory read back: summary.json, best.py, task.py, candidates.jsonl.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/report/run_directory.hpp"

namespace cudal1::report {

// One line of candidates.jsonl.
struct OptimizeCandidate {
  std::int64_t id = 0;
  int round = 0;
  std::optional<std::int64_t> prompt_id;
  std::string kind = "generated";  // "generated" | "unparseable"
  std::string status;
  std::optional<double> speedup;
  std::optional<std::array<double, 2>> speedup_ci;
  std::vector<std::string> flags;
  std::optional<double> roof;   // the candidate's profile: the share of the memory roof reached
  std::string profile_summary;  // ... and where its time goes
  std::string error;
  std::string analysis;  // the model's performance analysis
  std::string code;
  std::optional<std::int64_t> duplicate_of;
};

struct OptimizeRun {
  std::filesystem::path dir;
  nlohmann::json summary;            // summary.json as written by cudal1 optimize
  SourceFile reference;              // DIR/task.py, else the task path in summary.json
  SourceFile best;                   // DIR/best.py (none while no candidate is ok)
  bool has_candidates_file = false;  // runs made before candidates.jsonl existed have none
  std::vector<OptimizeCandidate> candidates;

  const OptimizeCandidate* best_candidate() const;  // by summary.best_candidate_id
};

// Throws InputError naming the file (and line) for anything unreadable or of the wrong shape.
OptimizeRun load_optimize_run(const std::filesystem::path& dir);

}  // namespace cudal1::report
