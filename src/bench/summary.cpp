#include "cudal1/bench/summary.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <ctime>

#include "cudal1/bench/baseline.hpp"
#include "cudal1/bench/result_line.hpp"
#include "cudal1/bench/score_statistics.hpp"

namespace cudal1::bench {
namespace {

using nlohmann::json;

json task_list(const std::vector<std::string>& keys) {
  return {{"count", keys.size()}, {"tasks", keys}};
}

bool has_task_flag(const json& line, const std::string& flag) {
  if (!line.contains("task_flags") || !line["task_flags"].is_array()) return false;
  const auto& flags = line["task_flags"];
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// {"overall": STATS, "levels": {"1": STATS, ...}} of the scores a function picks per line
// (lines it returns nullopt for are left out).
template <typename Pick>
json statistics_by_level(const std::vector<json>& lines, Pick pick) {
  std::vector<TaskScore> overall;
  std::map<int, std::vector<TaskScore>> by_level;
  for (const json& line : lines) {
    const std::optional<TaskScore> score = pick(line);
    if (!score) continue;
    overall.push_back(*score);
    by_level[line.value("level", 0)].push_back(*score);
  }
  json levels = json::object();
  for (const auto& [level, scores] : by_level) {
    levels[std::to_string(level)] = ScoreStatistics::of(scores).to_json();
  }
  return {{"overall", ScoreStatistics::of(overall).to_json()}, {"levels", levels}};
}

// The device of the verdicts: the first GPU description, and every distinct one when the
// tasks were spread over several GPUs.
void describe_devices(const std::vector<json>& lines, const SummaryContext& context, json& out) {
  std::vector<json> devices;
  for (const json& line : lines) {
    if (!line.contains("verdict") || !line["verdict"].is_object()) continue;
    const json device = line["verdict"].value("device", json());
    if (!device.is_object() || !device.contains("name")) continue;
    const auto same = [&device](const json& known) {
      return known.value("uuid", "") == device.value("uuid", "") &&
             known.value("index", "") == device.value("index", "");
    };
    if (std::none_of(devices.begin(), devices.end(), same)) devices.push_back(device);
  }
  out["device"] = devices.empty() ? context.device : devices.front();
  if (devices.size() > 1) out["devices"] = devices;
}

std::string cell(const json& value, int width, const char* format = "{:.3f}") {
  if (value.is_number_float())
    return fmt::format("{:>{}}", fmt::format(fmt::runtime(format), value.get<double>()), width);
  if (value.is_number()) return fmt::format("{:>{}}", value.dump(), width);
  return fmt::format("{:>{}}", "-", width);
}

std::string statistics_row(const std::string& label, const json& stats) {
  std::string row = fmt::format("{:<22}", label);
  const auto field = [&stats](const std::string& key) {
    return stats.is_object() ? stats.value(key, json()) : json();
  };
  row += cell(field("tasks"), 6) + cell(field("correct"), 8);
  for (double threshold : kFastThresholds) row += cell(field(fast_name(threshold)), 9);
  for (const char* key : {"mean", "median", "geomean", "p25", "p75", "max"}) {
    row += cell(field(key), 8, "{:.2f}");
  }
  return row + "\n";
}

std::string statistics_header() {
  std::string header = fmt::format("{:<22}{:>6}{:>8}", "", "tasks", "correct");
  for (double threshold : kFastThresholds) header += fmt::format("{:>9}", fast_name(threshold));
  for (const char* key : {"mean", "median", "geomean", "p25", "p75", "max"}) {
    header += fmt::format("{:>8}", key);
  }
  return header + "\n";
}

std::string listed(const json& group) {
  const auto tasks = group.value("tasks", std::vector<std::string>{});
  std::string text = std::to_string(tasks.size());
  if (!tasks.empty()) text += fmt::format(" ({})", fmt::join(tasks, ", "));
  return text;
}

}  // namespace

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

json make_summary(const std::vector<json>& lines, const SummaryContext& context) {
  json out = {{"suite", context.suite.string()}, {"solutions", context.solutions.string()}};
  describe_devices(lines, context, out);
  out["created_at"] = context.created_at.empty() ? utc_timestamp() : context.created_at;
  out["torch"] = context.torch;
  out["tolerance"] = context.tolerance;
  out["tasks"] = lines.size();
  const json main =
      statistics_by_level(lines, [](const json& line) { return std::optional(score_of(line)); });
  out["overall"] = main["overall"];
  out["levels"] = main["levels"];

  std::map<std::string, std::size_t> statuses;
  std::vector<std::string> rejected, degenerate, missing, task_errors;
  for (const json& line : lines) {
    const std::string status = line.value("status", std::string(kMissing));
    ++statuses[status];
    const std::string key = result_key(line);
    if (status == "rejected") rejected.push_back(key);
    if (status == kMissing) missing.push_back(key);
    if (has_task_flag(line, "degenerate")) degenerate.push_back(key);
    if (has_task_flag(line, kTaskError)) task_errors.push_back(key);
  }
  out["statuses"] = statuses;
  out["rejected"] = task_list(rejected);
  out["degenerate"] = task_list(degenerate);
  out["missing"] = task_list(missing);
  out["task_errors"] = task_list(task_errors);
  out["unmatched_solutions"] = task_list(context.unmatched_solutions);

  json baselines = json::object();
  for (const std::string& name : context.baselines) {
    if (const auto reason = context.unavailable.find(name); reason != context.unavailable.end()) {
      baselines[name] = {{"unavailable", reason->second}};
      continue;
    }
    std::vector<std::string> unavailable_tasks;
    for (const json& line : lines) {
      const auto score = baseline_score_of(line, name);
      if (score && score->status == kUnavailable) unavailable_tasks.push_back(result_key(line));
    }
    json entry = statistics_by_level(lines, [&name](const json& line) -> std::optional<TaskScore> {
      auto score = baseline_score_of(line, name);
      // A task whose line predates this baseline counts as not measured, not as a success.
      if (!score) return TaskScore{kUnavailable, std::nullopt};
      if (score->status == kUnavailable) return std::nullopt;
      return score;
    });
    entry["unavailable_tasks"] = task_list(unavailable_tasks);
    baselines[name] = entry;
  }
  out["baselines"] = baselines;
  out["throughput"] = context.throughput;
  return out;
}

std::string format_summary(const json& summary) {
  std::string device = "cpu";
  const json device_json = summary.value("device", json());
  if (device_json.is_object()) device = device_json.value("name", "a GPU");
  const json tolerance = summary.value("tolerance", json::object());
  std::string text =
      fmt::format("{} tasks of {} on {} (torch {}, tolerance {})\n", summary.value("tasks", 0),
                  summary.value("suite", ""), device, summary.value("torch", "?"),
                  tolerance.is_object() ? tolerance.value("mode", "default") : "default");
  text += statistics_header();
  text += statistics_row("overall", summary.value("overall", json::object()));
  const json levels = summary.value("levels", json::object());
  for (const auto& [level, stats] : levels.items()) {
    text += statistics_row("level " + level, stats);
  }
  const json baselines = summary.value("baselines", json::object());
  for (const auto& [name, baseline] : baselines.items()) {
    if (name == kEager) continue;
    if (baseline.contains("unavailable")) {
      text += fmt::format("{:<22}unavailable: {}\n", "vs " + name,
                          baseline["unavailable"].get<std::string>());
      continue;
    }
    text += statistics_row("vs " + name, baseline.value("overall", json()));
  }
  text += fmt::format("statuses: {}\n", summary.value("statuses", json::object()).dump());
  text += fmt::format("rejected: {}\ndegenerate: {}\n",
                      listed(summary.value("rejected", json::object())),
                      listed(summary.value("degenerate", json::object())));
  return text;
}

}  // namespace cudal1::bench
