// What the hack defenses found during one evaluation: flag names (verdict.hpp) with the evidence
// for each, gathered from the correctness trials, the timing phase and the device trace.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cudal1 {

struct Verdict;

struct Findings {
  std::vector<std::string> flags;
  std::vector<std::string> task_flags;
  nlohmann::json evidence = nlohmann::json::object();  // flag -> list of reasons

  // Records a finding; the first few reasons of each flag are kept.
  void add(std::string_view flag, const std::string& why);
  void add_task_flag(std::string_view flag, const std::string& why);
  bool has(std::string_view flag) const;
  // Adds every flag, task flag and reason of another phase's findings, each reason after
  // `prefix` (e.g. "timing round 2: ").
  void merge(const Findings& other, const std::string& prefix = "");
  // Copies flags and evidence into a verdict (details.findings).
  void apply_to(Verdict& verdict) const;
};

// Findings from the guard reports of both workers (cudal1_host.capture_guards): a replaced
// torch/time/comparison function or a changed task global -> tampering; changed TF32, reduced
// precision or autocast settings -> precision_downcast. Whatever the reference's own process
// reports as changed is the task's doing and is not held against the candidate. `when` names the
// phase for the evidence.
void add_guard_findings(Findings& findings, const nlohmann::json& candidate_guards,
                        const nlohmann::json& reference_guards, const std::string& when);

}  // namespace cudal1
