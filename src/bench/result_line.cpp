#include "cudal1/bench/result_line.hpp"

#include <fmt/format.h>

namespace cudal1::bench {
namespace {

using nlohmann::json;

json task_fields(const SuiteTask& task) {
  return {{"level", task.ref.level},
          {"task_id", task.ref.id},
          {"task_name", task.name},
          {"task_file", task.file.string()}};
}

std::optional<double> number(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  return object[key].get<double>();
}

}  // namespace

json result_line(const SuiteTask& task, const EvaluatedSolution& solution, const Verdict& eager,
                 const json& baselines) {
  const json verdict = eager.to_json();
  json line = task_fields(task);
  line["solution_file"] = solution.file.string();
  line["solution_sha256"] = solution.sha256;
  for (const char* key : {"status", "correct", "speedup", "speedup_ci", "reward", "reference_ms",
                          "candidate_ms", "flags", "task_flags", "error"}) {
    line[key] = verdict[key];
  }
  line["baselines"] = baselines;
  line["verdict"] = verdict;
  return line;
}

json missing_line(const SuiteTask& task, const std::string& why, const json& baselines) {
  json line = task_fields(task);
  line.update({{"solution_file", nullptr},
               {"solution_sha256", nullptr},
               {"status", kMissing},
               {"correct", false},
               {"speedup", nullptr},
               {"speedup_ci", nullptr},
               {"reward", 0.0},
               {"reference_ms", nullptr},
               {"candidate_ms", nullptr},
               {"flags", json::array()},
               {"task_flags", json::array()},
               {"error", why},
               {"baselines", baselines},
               {"verdict", nullptr}});
  return line;
}

json baseline_entry(const Verdict& verdict) {
  const json full = verdict.to_json();
  json entry = {{"status", full["status"]},
                {"speedup", full["speedup"]},
                {"speedup_ci", full["speedup_ci"]},
                {"baseline_ms", full["reference_ms"]},
                {"candidate_ms", full["candidate_ms"]}};
  if (!verdict.flags.empty()) entry["flags"] = verdict.flags;
  if (!verdict.error.empty()) entry["error"] = verdict.error;
  return entry;
}

json unavailable_entry(const std::string& reason) {
  return {{"status", kUnavailable}, {"reason", reason}};
}

json untimed_entry(const std::string& status, const std::string& reason) {
  return {{"status", status},
          {"speedup", nullptr},
          {"speedup_ci", nullptr},
          {"baseline_ms", nullptr},
          {"reason", reason}};
}

TaskScore score_of(const json& line) {
  return {line.value("status", std::string(kMissing)), number(line, "speedup")};
}

std::optional<TaskScore> baseline_score_of(const json& line, const std::string& baseline) {
  if (!line.contains("baselines") || !line["baselines"].is_object() ||
      !line["baselines"].contains(baseline))
    return std::nullopt;
  const json& entry = line["baselines"][baseline];
  return TaskScore{entry.value("status", std::string(kMissing)), number(entry, "speedup")};
}

std::string result_key(const json& line) {
  return fmt::format("level{}/{}", line.value("level", 0), line.value("task_name", std::string()));
}

}  // namespace cudal1::bench
