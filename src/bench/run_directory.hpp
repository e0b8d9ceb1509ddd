// The benchmark's output directory (internal to src/bench): its lock, its record of what it was
// made from, the copies of the evaluated solutions and the generated baseline tasks.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/task/suite.hpp"

namespace cudal1::bench {

class RunDirectory {
 public:
  // Creates `out` and locks it. `run` = {"suite", "solutions", "devices", ...}: recorded in
  // OUT/bench.json. Throws InputError when another cudal1 bench holds the lock, when `out` is a
  // file, or when OUT holds results of another suite, of another kind of device (CPU vs GPU) or
  // compared under another tolerance.
  RunDirectory(const std::filesystem::path& out, const nlohmann::json& run);
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::filesystem::path& path() const { return out_; }
  std::filesystem::path results_file() const { return out_ / "results.jsonl"; }
  std::filesystem::path summary_file() const { return out_ / "summary.json"; }

  // OUT/solutions/level<L>/<Name>.py holding `code` (rewritten only when it differs).
  std::filesystem::path write_solution(const SuiteTask& task, const std::string& code) const;
  // OUT/baselines/<baseline>/level<L>/<Name>.py: the generated task of a non-eager baseline.
  std::filesystem::path write_baseline_task(const std::string& baseline,
                                            const SuiteTask& task) const;
  void write_summary(const nlohmann::json& summary) const;

 private:
  std::filesystem::path out_;
  int lock_fd_ = -1;
};

}  // namespace cudal1::bench
