#include "cudal1/bench/comparison.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "cudal1/bench/result_line.hpp"
#include "cudal1/bench/result_log.hpp"
#include "cudal1/bench/score_statistics.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::optional<double> positive(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_number()) return std::nullopt;
  const double value = object[key].get<double>();
  return value > 0 ? std::optional<double>(value) : std::nullopt;
}

json ratio(std::optional<double> a, std::optional<double> b) {
  return a && b ? json(*b / *a) : json();
}

json side(const json& line) {
  return {{"status", line.value("status", "")},
          {"speedup", line.value("speedup", json())},
          {"reference_ms", line.value("reference_ms", json())},
          {"candidate_ms", line.value("candidate_ms", json())}};
}

json geomean(const std::vector<double>& values) {
  if (values.empty()) return json();
  double sum = 0;
  for (double v : values) sum += std::log(v);
  return std::exp(sum / static_cast<double>(values.size()));
}

// The fields of STATS, in the order the summary lists them.
std::vector<std::string> statistic_names() {
  std::vector<std::string> keys = {"tasks", "correct", "success_rate"};
  for (double threshold : kFastThresholds) keys.push_back(fast_name(threshold));
  for (const char* key : {"mean", "median", "geomean", "p25", "p75", "max"}) keys.push_back(key);
  return keys;
}

// {statistic: {"a", "b", "ratio"}} for two STATS objects.
json compare_statistics(const json& a, const json& b) {
  json out = json::object();
  for (const std::string& key : statistic_names()) {
    const json left = a.is_object() ? a.value(key, json()) : json();
    const json right = b.is_object() ? b.value(key, json()) : json();
    json entry = {{"a", left}, {"b", right}, {"ratio", nullptr}};
    if (left.is_number() && right.is_number() && left.get<double>() != 0) {
      entry["ratio"] = right.get<double>() / left.get<double>();
    }
    out[key] = entry;
  }
  return out;
}

std::string device_name(const json& summary) {
  const json device = summary.value("device", json());
  if (device.is_object()) return device.value("name", device.value("index", "GPU"));
  return device.is_string() ? device.get<std::string>() : "?";
}

std::string number_text(const json& value, const char* format = "{:.3f}") {
  if (value.is_number_integer()) return value.dump();
  return value.is_number() ? fmt::format(fmt::runtime(format), value.get<double>()) : "-";
}

}  // namespace

ResultSet ResultSet::load(const fs::path& path) {
  std::error_code ec;
  ResultSet set;
  set.summary_file = fs::is_directory(path, ec) ? path / "summary.json" : path;
  if (!fs::exists(set.summary_file, ec)) {
    throw InputError(
        fmt::format("'{}' does not exist (give OUT/summary.json or the directory OUT "
                    "of a cudal1 bench run)",
                    set.summary_file.string()));
  }
  try {
    set.summary = json::parse(read_file(set.summary_file));
  } catch (const std::exception& e) {
    throw InputError(
        fmt::format("'{}' is not valid JSON: {}", set.summary_file.string(), e.what()));
  }
  if (!set.summary.is_object() || !set.summary.contains("overall")) {
    throw InputError(fmt::format("'{}' is not a cudal1 bench summary (no \"overall\")",
                                 set.summary_file.string()));
  }
  const fs::path results = set.summary_file.parent_path() / "results.jsonl";
  if (fs::exists(results, ec)) set.lines = ResultLog::read(results);
  return set;
}

json compare_result_sets(const ResultSet& a, const ResultSet& b) {
  json out = {{"a",
               {{"summary", a.summary_file.string()},
                {"device", device_name(a.summary)},
                {"torch", a.summary.value("torch", "")}}},
              {"b",
               {{"summary", b.summary_file.string()},
                {"device", device_name(b.summary)},
                {"torch", b.summary.value("torch", "")}}}};
  std::set<TaskRef> refs;
  for (const auto& [ref, line] : a.lines) refs.insert(ref);
  for (const auto& [ref, line] : b.lines) refs.insert(ref);
  json tasks = json::array();
  json only_a = json::array(), only_b = json::array(), changed = json::array();
  std::vector<double> speedups, candidate_times, reference_times;
  for (const TaskRef& ref : refs) {
    const auto left = a.lines.find(ref);
    const auto right = b.lines.find(ref);
    if (right == b.lines.end()) {
      only_a.push_back(result_key(left->second));
      continue;
    }
    if (left == a.lines.end()) {
      only_b.push_back(result_key(right->second));
      continue;
    }
    const json& x = left->second;
    const json& y = right->second;
    json row = {
        {"task", result_key(x)},
        {"level", ref.level},
        {"task_id", ref.id},
        {"a", side(x)},
        {"b", side(y)},
        {"speedup_ratio", ratio(positive(x, "speedup"), positive(y, "speedup"))},
        {"candidate_ms_ratio", ratio(positive(x, "candidate_ms"), positive(y, "candidate_ms"))},
        {"reference_ms_ratio", ratio(positive(x, "reference_ms"), positive(y, "reference_ms"))}};
    const bool ok_a = is_success(score_of(x));
    const bool ok_b = is_success(score_of(y));
    if (x.value("status", "") != y.value("status", "")) {
      changed.push_back(
          {{"task", row["task"]}, {"a", x.value("status", "")}, {"b", y.value("status", "")}});
    }
    if (ok_a && ok_b) {
      for (auto [values, key] : {std::pair{&speedups, "speedup_ratio"},
                                 std::pair{&candidate_times, "candidate_ms_ratio"},
                                 std::pair{&reference_times, "reference_ms_ratio"}}) {
        if (row[key].is_number()) values->push_back(row[key].get<double>());
      }
    }
    tasks.push_back(row);
  }
  json levels = json::object();
  std::set<std::string> level_names;
  const json levels_a = a.summary.value("levels", json::object());
  const json levels_b = b.summary.value("levels", json::object());
  for (const auto& [level, stats] : levels_a.items()) level_names.insert(level);
  for (const auto& [level, stats] : levels_b.items()) level_names.insert(level);
  for (const std::string& level : level_names) {
    levels[level] =
        compare_statistics(levels_a.value(level, json()), levels_b.value(level, json()));
  }
  out["tasks"] = tasks;
  out["only_in_a"] = only_a;
  out["only_in_b"] = only_b;
  out["aggregate"] = {{"tasks_in_both", tasks.size()},
                      {"ok_in_both", speedups.size()},
                      {"status_changed", changed},
                      {"geomean_speedup_ratio", geomean(speedups)},
                      {"geomean_candidate_ms_ratio", geomean(candidate_times)},
                      {"geomean_reference_ms_ratio", geomean(reference_times)},
                      {"overall", compare_statistics(a.summary.value("overall", json()),
                                                     b.summary.value("overall", json()))},
                      {"levels", levels}};
  return out;
}

std::string format_comparison(const json& c) {
  std::string text = fmt::format("A: {} ({}, torch {})\nB: {} ({}, torch {})\n\n",
                                 c["a"].value("summary", ""), c["a"].value("device", ""),
                                 c["a"].value("torch", ""), c["b"].value("summary", ""),
                                 c["b"].value("device", ""), c["b"].value("torch", ""));
  text += fmt::format("{:<34} {:<14} {:<14} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}\n", "task",
                      "A status", "B status", "A speedup", "B speedup", "B/A", "A cand ms",
                      "B cand ms", "B/A");
  for (const json& row : c["tasks"]) {
    text += fmt::format(
        "{:<34} {:<14} {:<14} {:>9} {:>9} {:>7} {:>10} {:>10} {:>7}\n", row.value("task", ""),
        row["a"].value("status", ""), row["b"].value("status", ""),
        number_text(row["a"]["speedup"]), number_text(row["b"]["speedup"]),
        number_text(row["speedup_ratio"]), number_text(row["a"]["candidate_ms"], "{:.4g}"),
        number_text(row["b"]["candidate_ms"], "{:.4g}"), number_text(row["candidate_ms_ratio"]));
  }
  const json& aggregate = c["aggregate"];
  text += fmt::format(
      "\n{} tasks on both sides, {} ok on both; geometric means of B/A over those: speedup {}, "
      "candidate time {}, reference time {}\n",
      aggregate.value("tasks_in_both", 0), aggregate.value("ok_in_both", 0),
      number_text(aggregate["geomean_speedup_ratio"]),
      number_text(aggregate["geomean_candidate_ms_ratio"]),
      number_text(aggregate["geomean_reference_ms_ratio"]));
  text += fmt::format("\n{:<14} {:>10} {:>10} {:>8}\n", "overall", "A", "B", "B/A");
  for (const std::string& key : statistic_names()) {
    const json& entry = aggregate["overall"][key];
    text += fmt::format("{:<14} {:>10} {:>10} {:>8}\n", key, number_text(entry["a"]),
                        number_text(entry["b"]), number_text(entry["ratio"]));
  }
  for (const json& change : aggregate["status_changed"]) {
    text += fmt::format("status changed: {} {} -> {}\n", change.value("task", ""),
                        change.value("a", ""), change.value("b", ""));
  }
  const auto list = [](const json& tasks) {
    return tasks.empty()
               ? std::string("(none)")
               : fmt::format("{}", fmt::join(tasks.get<std::vector<std::string>>(), ", "));
  };
  text += fmt::format("only in A: {}\nonly in B: {}\n", list(c["only_in_a"]), list(c["only_in_b"]));
  return text;
}

}  // namespace cudal1::bench
