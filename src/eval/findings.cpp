#include "cudal1/eval/findings.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "cudal1/eval/verdict.hpp"

namespace cudal1 {
namespace {

constexpr std::size_t kMaxReasons = 5;

void note(nlohmann::json& evidence, std::string_view flag, const std::string& why) {
  auto& reasons = evidence[std::string(flag)];
  if (!reasons.is_array()) reasons = nlohmann::json::array();
  if (reasons.size() < kMaxReasons &&
      std::find(reasons.begin(), reasons.end(), nlohmann::json(why)) == reasons.end())
    reasons.push_back(why);
}

std::vector<std::string> strings_of(const nlohmann::json& guards, const char* key) {
  if (!guards.is_object() || !guards.contains(key) || !guards[key].is_array()) return {};
  return guards[key].get<std::vector<std::string>>();
}

std::vector<std::string> minus(const std::vector<std::string>& a,
                               const std::vector<std::string>& b) {
  std::vector<std::string> out;
  for (const auto& x : a) {
    if (std::find(b.begin(), b.end(), x) == b.end()) out.push_back(x);
  }
  return out;
}

}  // namespace

void Findings::add(std::string_view flag, const std::string& why) {
  if (!has(flag)) flags.emplace_back(flag);
  note(evidence, flag, why);
}

void Findings::add_task_flag(std::string_view flag, const std::string& why) {
  if (std::find(task_flags.begin(), task_flags.end(), flag) == task_flags.end())
    task_flags.emplace_back(flag);
  note(evidence, flag, why);
}

bool Findings::has(std::string_view flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

void Findings::merge(const Findings& other, const std::string& prefix) {
  auto reasons = [&](const std::string& flag) {
    return other.evidence.value(flag, nlohmann::json::array());
  };
  for (const auto& flag : other.flags) {
    if (!has(flag)) flags.push_back(flag);
    for (const auto& why : reasons(flag)) note(evidence, flag, prefix + why.get<std::string>());
  }
  for (const auto& flag : other.task_flags) {
    if (std::find(task_flags.begin(), task_flags.end(), flag) == task_flags.end())
      task_flags.push_back(flag);
    for (const auto& why : reasons(flag)) note(evidence, flag, prefix + why.get<std::string>());
  }
}

void Findings::apply_to(Verdict& verdict) const {
  for (const auto& flag : flags) verdict.add_flag(flag);
  for (const auto& flag : task_flags) {
    if (std::find(verdict.task_flags.begin(), verdict.task_flags.end(), flag) ==
        verdict.task_flags.end())
      verdict.task_flags.push_back(flag);
  }
  if (!evidence.empty()) {
    auto& out = verdict.details["findings"];
    if (!out.is_object()) out = nlohmann::json::object();
    for (const auto& [flag, reasons] : evidence.items()) {
      for (const auto& why : reasons) note(out, flag, why.get<std::string>());
    }
  }
}

void add_guard_findings(Findings& findings, const nlohmann::json& candidate_guards,
                        const nlohmann::json& reference_guards, const std::string& when) {
  const auto patched =
      minus(strings_of(candidate_guards, "patched"), strings_of(reference_guards, "patched"));
  if (!patched.empty()) {
    findings.add(flag::kTampering,
                 fmt::format("{}: the candidate replaced {}", when, fmt::join(patched, ", ")));
  }
  const auto globals = minus(strings_of(candidate_guards, "task_globals_changed"),
                             strings_of(reference_guards, "task_globals_changed"));
  if (!globals.empty()) {
    findings.add(flag::kTampering, fmt::format("{}: the candidate changed the task's globals {}",
                                               when, fmt::join(globals, ", ")));
  }
  const auto precision = candidate_guards.value("precision_changed", nlohmann::json::object());
  const auto reference_precision =
      reference_guards.value("precision_changed", nlohmann::json::object());
  for (const auto& [name, change] : precision.items()) {
    if (reference_precision.contains(name)) continue;
    findings.add(flag::kPrecisionDowncast,
                 fmt::format("{}: the candidate changed {} from {} to {}", when, name,
                             change.at(0).get<std::string>(), change.at(1).get<std::string>()));
  }
}

}  // namespace cudal1
