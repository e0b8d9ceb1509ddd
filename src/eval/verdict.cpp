#include "cudal1/eval/verdict.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/eval/reward.hpp"

namespace cudal1 {
namespace {

constexpr std::array<std::string_view, 7> kStatusNames = {
    "ok", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "unparseable"};

nlohmann::json optional_number(const std::optional<double>& value) {
  if (!value || !std::isfinite(*value)) return nullptr;
  return *value;
}

std::optional<double> read_optional(const nlohmann::json& json, const char* key) {
  if (!json.contains(key) || !json[key].is_number()) return std::nullopt;
  return json[key].get<double>();
}

}  // namespace

std::string_view to_string(Status status) {
  return kStatusNames[static_cast<std::size_t>(status)];
}

std::optional<Status> parse_status(std::string_view text) {
  for (std::size_t i = 0; i < kStatusNames.size(); ++i) {
    if (kStatusNames[i] == text) return static_cast<Status>(i);
  }
  return std::nullopt;
}

void Verdict::add_flag(std::string_view name) {
  if (!has_flag(name)) flags.emplace_back(name);
}

bool Verdict::has_flag(std::string_view name) const {
  return std::find(flags.begin(), flags.end(), name) != flags.end();
}

bool Verdict::trusted() const {
  return status == Status::kOk && speedup.has_value() &&
         std::none_of(flags.begin(), flags.end(), is_reject_flag);
}

void Verdict::finalize() {
  // A detected hack is the verdict, whether or not the outputs also happened to be wrong.
  if ((status == Status::kOk || status == Status::kIncorrect) &&
      std::any_of(flags.begin(), flags.end(), is_reject_flag)) {
    status = Status::kRejected;
  }
  reward = status == Status::kOk && speedup
               ? interval_reward(*speedup,
                                 speedup_ci ? std::optional<double>(speedup_ci->low) : std::nullopt)
               : 0.0;
}

nlohmann::json Verdict::to_json() const {
  nlohmann::json out = {
      {"status", to_string(status)},
      {"correct", correct},
      {"speedup", optional_number(speedup)},
      {"speedup_ci", speedup_ci ? nlohmann::json::array({optional_number(speedup_ci->low),
                                                         optional_number(speedup_ci->high)})
                                : nlohmann::json(nullptr)},
      {"reward", reward},
      {"reference_ms", optional_number(reference_ms)},
      {"candidate_ms", optional_number(candidate_ms)},
      {"samples", samples},
      {"max_abs_error", optional_number(max_abs_error)},
      {"max_rel_error", optional_number(max_rel_error)},
      {"flags", flags},
      {"task_flags", task_flags},
      {"seeds", seeds},
      {"device", device},
      {"log", log},
      {"error", error},
  };
  for (const auto& [key, value] : details.items()) out[key] = value;
  return out;
}

Verdict Verdict::from_json(const nlohmann::json& json) {
  Verdict v;
  v.status = parse_status(json.value("status", "")).value_or(Status::kRuntimeError);
  v.correct = json.value("correct", false);
  v.speedup = read_optional(json, "speedup");
  if (json.contains("speedup_ci") && json["speedup_ci"].is_array() &&
      json["speedup_ci"].size() == 2 && json["speedup_ci"][0].is_number() &&
      json["speedup_ci"][1].is_number()) {
    v.speedup_ci =
        Interval{json["speedup_ci"][0].get<double>(), json["speedup_ci"][1].get<double>()};
  }
  v.reward = json.value("reward", 0.0);
  v.reference_ms = read_optional(json, "reference_ms");
  v.candidate_ms = read_optional(json, "candidate_ms");
  v.samples = json.value("samples", std::size_t{0});
  v.max_abs_error = read_optional(json, "max_abs_error");
  v.max_rel_error = read_optional(json, "max_rel_error");
  v.flags = json.value("flags", std::vector<std::string>{});
  v.task_flags = json.value("task_flags", std::vector<std::string>{});
  v.seeds = json.value("seeds", nlohmann::json::object());
  v.device = json.value("device", nlohmann::json("cpu"));
  v.log = json.value("log", "");
  v.error = json.value("error", "");
  static const std::array<std::string_view, 17> kCore = {
      "status",       "correct", "speedup",       "speedup_ci",    "reward", "reference_ms",
      "candidate_ms", "samples", "max_abs_error", "max_rel_error", "flags",  "task_flags",
      "seeds",        "device",  "log",           "error",         ""};
  for (const auto& [key, value] : json.items()) {
    if (std::find(kCore.begin(), kCore.end(), key) == kCore.end()) v.details[key] = value;
  }
  return v;
}

std::string Verdict::summary_line() const {
  std::string line(to_string(status));
  if (speedup) {
    line += fmt::format(" {:.3f}x", *speedup);
    if (speedup_ci) line += fmt::format(" [{:.3f}, {:.3f}]", speedup_ci->low, speedup_ci->high);
    line += fmt::format(" ref {:.4g} ms cand {:.4g} ms ({} samples) reward {:.2f}",
                        reference_ms.value_or(NAN), candidate_ms.value_or(NAN), samples, reward);
  }
  if (max_abs_error) line += fmt::format(" max_abs_err {:.2e}", *max_abs_error);
  if (!flags.empty()) line += fmt::format(" flags {}", fmt::join(flags, ","));
  if (!task_flags.empty()) line += fmt::format(" task_flags {}", fmt::join(task_flags, ","));
  if (!error.empty()) line += ": " + error.substr(0, std::min<std::size_t>(error.find('\n'), 300));
  if (device.is_object() && device.contains("name"))
    line += " on " + device["name"].get<std::string>();
  return line;
}

Verdict unusable_candidate_verdict(std::string_view message) {
  Verdict verdict;
  verdict.status = Status::kCompileError;
  verdict.error = std::string(message.substr(0, message.find('\n')));
  verdict.log = trim_log(message);
  verdict.finalize();
  return verdict;
}

}  // namespace cudal1
