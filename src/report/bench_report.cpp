// The report of a cudal1 bench output directory.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "cudal1/report/html_report.hpp"
#include "cudal1/report/html_text.hpp"
#include "html_fragments.hpp"
#include "html_page.hpp"

namespace cudal1::report {
namespace {

std::string task_anchor(const TaskResult& task) {
  return html_id(fmt::format("task-l{}-{}", task.level, task.name));
}

// A JSON value for a header line: strings as they are, objects as "key value, ...".
std::string describe(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    std::string out;
    for (const auto& [key, item] : value.items()) {
      if (item.is_null()) continue;
      out += (out.empty() ? "" : ", ") + key + " " +
             (item.is_string() ? item.get<std::string>() : item.dump());
    }
    return out;
  }
  return value.is_null() ? "" : value.dump();
}

std::string header(const BenchRun& run, const std::string& title) {
  const auto& s = run.summary;
  std::string out = fmt::format("<header>\n<h1>{}</h1>\n", escape_html(title));
  auto meta = [&out](std::string_view label, const std::string& text) {
    if (!text.empty())
      out += fmt::format("<p class=\"meta\">{}: <code>{}</code></p>\n", label, escape_html(text));
  };
  meta("Suite", describe(s.value("suite", nlohmann::json())));
  meta("Solutions", describe(s.value("solutions", nlohmann::json())));
  meta("Device", describe(s.value("device", nlohmann::json())));
  meta("PyTorch", describe(s.value("torch", nlohmann::json())));
  meta("Created", describe(s.value("created_at", nlohmann::json())));
  const auto throughput = s.value("throughput", nlohmann::json::object());
  if (number_field(throughput, "wall_s")) {
    meta("Throughput",
         fmt::format("{} s wall, {} candidates per hour",
                     format_number(number_field(throughput, "wall_s"), 1),
                     format_number(number_field(throughput, "candidates_per_hour"), 1)));
  }
  meta("Results", run.dir.string());
  return out + "</header>\n";
}

// Counts the summary table takes from results.jsonl (summary.json has them only overall).
struct LevelCounts {
  int rejected = 0;
  int degenerate = 0;
};

std::string stats_row(std::string_view scope, const nlohmann::json& stats,
                      const LevelCounts& counts, bool overall) {
  auto n = [&stats](const char* key) { return number_field(stats, key); };
  std::string row = overall ? "<tr class=\"overall\">" : "<tr>";
  row += text_cell(scope);
  row += number_cell(n("tasks"), format_number(n("tasks"), 0));
  row += number_cell(n("correct"), format_number(n("correct"), 0));
  for (const char* key : {"success_rate", "fast_0", "fast_1", "fast_1.5", "fast_2"})
    row += number_cell(n(key), format_percent(n(key)));
  for (const char* key : {"mean", "median", "geomean"})
    row += number_cell(n(key), format_speedup(n(key)));
  const auto p25 = n("p25"), p75 = n("p75");
  row += number_cell(p25, p25 && p75 ? fmt::format("{:.3f}\u2013{:.3f}", *p25, *p75) : "\u2013");
  row += number_cell(n("max"), format_speedup(n("max")));
  row += number_cell(counts.rejected, std::to_string(counts.rejected));
  row += number_cell(counts.degenerate, std::to_string(counts.degenerate));
  return row + "</tr>\n";
}

std::string stats_table(const nlohmann::json& overall, const nlohmann::json& levels,
                        const std::map<int, LevelCounts>& counts, const LevelCounts& total) {
  std::string out =
      "<div class=\"table-wrap\"><table class=\"summary\"><thead><tr><th>Scope</th>"
      "<th class=\"num\">Tasks</th><th class=\"num\">Correct</th><th class=\"num\">Success</th>"
      "<th class=\"num\" title=\"correct and faster than the reference (speedup &gt; 1 for "
      "fast_1)\">fast_0</th><th class=\"num\">fast_1</th><th class=\"num\">fast_1.5</th>"
      "<th class=\"num\">fast_2</th><th class=\"num\">Mean</th><th class=\"num\">Median</th>"
      "<th class=\"num\">Geomean</th><th class=\"num\">p25\u2013p75</th><th class=\"num\">Max</th>"
      "<th class=\"num\">Rejected</th><th class=\"num\">Degenerate</th></tr></thead><tbody>\n";
  out += stats_row("All levels", overall, total, true);
  std::vector<std::pair<int, std::string>> keys;
  for (const auto& [key, value] : levels.items()) {
    try {
      keys.emplace_back(std::stoi(key), key);
    } catch (const std::exception&) {
      keys.emplace_back(1 << 20, key);  // not a number: after the numbered levels
    }
  }
  std::sort(keys.begin(), keys.end());
  for (const auto& [level, key] : keys) {
    const auto it = counts.find(level);
    out += stats_row("Level " + key, levels[key], it == counts.end() ? LevelCounts{} : it->second,
                     false);
  }
  return out + "</tbody></table></div>\n";
}

std::string summary_section(const BenchRun& run) {
  std::map<int, LevelCounts> counts;
  LevelCounts total;
  for (const auto& task : run.tasks) {
    auto& level = counts[task.level];
    if (task.status == "rejected") ++level.rejected, ++total.rejected;
    if (task.degenerate()) ++level.degenerate, ++total.degenerate;
  }
  const auto& s = run.summary;
  std::string out = "<section id=\"summary\">\n<h2>Summary</h2>\n";
  out +=
      "<p class=\"meta\">Speedups are over the eager PyTorch reference, of tasks whose "
      "solution is correct and not rejected; success and fast_p are fractions of all "
      "tasks.</p>\n";
  out += stats_table(s.value("overall", nlohmann::json::object()),
                     s.value("levels", nlohmann::json::object()), counts, total);
  for (const char* key : {"rejected", "degenerate"}) {
    const auto group = s.value(key, nlohmann::json::object());
    const auto tasks = group.value("tasks", nlohmann::json::array());
    if (!tasks.is_array() || tasks.empty()) continue;
    std::string names;
    for (const auto& name : tasks) names += (names.empty() ? "" : ", ") + describe(name);
    out += fmt::format("<p class=\"meta\">{} ({}): {}</p>\n",
                       std::string(key) == "rejected" ? "Rejected as hacks" : "Degenerate tasks",
                       tasks.size(), escape_html(names));
  }
  // The torch.compile baseline, where the bench could measure it.
  const auto compile =
      s.value("baselines", nlohmann::json::object()).value("compile", nlohmann::json::object());
  out += "<h3>Against torch.compile</h3>\n";
  if (compile.contains("overall")) {
    out += stats_table(compile["overall"], compile.value("levels", nlohmann::json::object()),
                       counts, total);
  } else {
    const std::string reason =
        describe(compile.value("unavailable", nlohmann::json("not measured")));
    out += fmt::format("<p class=\"unavailable\">Not available: {}</p>\n", escape_html(reason));
  }
  return out + "</section>\n";
}

// One ECDF chart per level, of the verified speedups.
std::string distribution_section(const BenchRun& run, nlohmann::json& charts) {
  std::string out =
      "<section id=\"distribution\">\n<h2>Speedup distribution</h2>\n"
      "<p class=\"chart-note\">Each point is a task with a verified speedup: the share of "
      "that level's verified tasks at or below it. Right of the dashed line is faster than the "
      "reference.</p>\n<div class=\"charts\">\n";
  for (const int level : run.levels()) {
    std::vector<std::pair<double, std::string>> speedups;
    int tasks = 0;
    for (const auto& task : run.tasks) {
      if (task.level != level) continue;
      ++tasks;
      if (task.verified() && *task.speedup > 0) speedups.emplace_back(*task.speedup, task.name);
    }
    if (speedups.empty()) {
      out += fmt::format(
          "<div class=\"chart chart-missing\">Level {}: no verified speedup among {} tasks</div>\n",
          level, tasks);
      continue;
    }
    std::sort(speedups.begin(), speedups.end());
    nlohmann::json points = nlohmann::json::array();
    for (std::size_t i = 0; i < speedups.size(); ++i) {
      points.push_back({{"x", speedups[i].first},
                        {"y", static_cast<double>(i + 1) / static_cast<double>(speedups.size())},
                        {"label", speedups[i].second}});
    }
    const std::string canvas = fmt::format("chart-level-{}", level);
    charts.push_back(
        {{"canvas", canvas},
         {"type", "ecdf"},
         {"title", fmt::format("Level {}: {} of {} tasks verified", level, speedups.size(), tasks)},
         {"points", points},
         {"min_speedup", speedups.front().first},
         {"max_speedup", speedups.back().first}});
    out += fmt::format(
        "<div class=\"chart\"><canvas id=\"{}\" role=\"img\" aria-label=\"speedup distribution of "
        "level {}\"></canvas></div>\n",
        canvas, level);
  }
  return out + "</div>\n</section>\n";
}

std::string compile_cell(const TaskResult& task) {
  const auto compile = task.baselines.value("compile", nlohmann::json::object());
  if (!compile.is_object() || compile.empty()) return number_cell(std::nullopt, "\u2013");
  const auto speedup = number_field(compile, "speedup");
  if (speedup) return number_cell(speedup, format_speedup(speedup));
  return number_cell(std::nullopt, describe(compile.value("status", nlohmann::json("\u2013"))));
}

std::string task_table(const BenchRun& run) {
  std::string out =
      "<section id=\"tasks\">\n<h2>Tasks</h2>\n<p class=\"meta\">Click a column header to sort; "
      "click a task for its code, its diff against the reference and the full error.</p>\n"
      "<div class=\"table-wrap\"><table class=\"sortable tasks\" id=\"task-table\"><thead><tr>"
      "<th data-type=\"number\" class=\"num\">Level</th><th data-type=\"text\">Task</th>"
      "<th data-type=\"text\">Status</th><th data-type=\"text\">Flags</th>"
      "<th data-type=\"number\" class=\"num\">Speedup</th>"
      "<th data-type=\"number\" class=\"num\">95 % CI</th>"
      "<th data-type=\"number\" class=\"num\">Reward</th>"
      "<th data-type=\"number\" class=\"num\">Ref ms</th>"
      "<th data-type=\"number\" class=\"num\">Cand ms</th>"
      "<th data-type=\"number\" class=\"num\" title=\"the nearer of two roofs: the bytes a call "
      "must "
      "move over its time against the device's measured bandwidth, and the reference's arithmetic "
      "over its time against the measured matmul throughput (above 100 %: less arithmetic than "
      "the reference)\">Of roof</th>"
      "<th data-type=\"number\" class=\"num\" title=\"speedup against torch.compile\">vs "
      "compile</th>"
      "<th data-type=\"text\">Error</th></tr></thead><tbody>\n";
  for (const auto& task : run.tasks) {
    out += "<tr>";
    out += number_cell(task.level, std::to_string(task.level));
    out +=
        fmt::format("<td><a href=\"#{}\">{}</a></td>", task_anchor(task), escape_html(task.name));
    out += fmt::format("<td data-value=\"{}\">{}</td>", escape_html(task.status),
                       status_badge(task.status));
    std::string flag_names;
    for (const auto& flag : task.flags) flag_names += flag + " ";
    for (const auto& flag : task.task_flags) flag_names += flag + " ";
    out += fmt::format("<td data-value=\"{}\">{}</td>", escape_html(flag_names),
                       flag_list(task.flags, task.task_flags));
    out += number_cell(task.speedup, format_speedup(task.speedup));
    out +=
        number_cell(task.speedup_ci ? std::optional<double>((*task.speedup_ci)[0]) : std::nullopt,
                    format_interval(task.speedup_ci));
    out += number_cell(task.reward, format_number(task.reward, 2));
    out += number_cell(task.reference_ms, format_number(task.reference_ms));
    out += number_cell(task.candidate_ms, format_number(task.candidate_ms));
    out += roof_cell(task.roof);
    out += compile_cell(task);
    out += text_cell(cell_teaser(task.error), "error-cell");
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n</section>\n";
}

std::string task_details(const TaskResult& task) {
  std::string out = fmt::format(
      "<details class=\"task\" id=\"{}\"><summary>Level {} \u00b7 <strong>{}</strong> {} "
      "{}</summary>\n",
      task_anchor(task), task.level, escape_html(task.name), status_badge(task.status),
      escape_html(format_speedup(task.speedup)));
  out += "<dl class=\"facts\">";
  out +=
      fmt::format("<dt>Task file</dt><dd><code>{}</code></dd>",
                  escape_html(task.task.path.empty() ? "not recorded" : task.task.path.string()));
  out +=
      fmt::format("<dt>Solution file</dt><dd><code>{}</code></dd>",
                  escape_html(task.solution.path.empty() ? "none" : task.solution.path.string()));
  if (task.speedup_ci)
    out +=
        fmt::format("<dt>95 % CI</dt><dd>{}</dd>", escape_html(format_interval(task.speedup_ci)));
  if (!task.flags.empty() || !task.task_flags.empty())
    out += fmt::format("<dt>Flags</dt><dd>{}</dd>", flag_list(task.flags, task.task_flags));
  if (!task.profile_summary.empty())
    out += fmt::format("<dt>Profile</dt><dd>{}</dd>", escape_html(task.profile_summary));
  out += "</dl>\n";
  if (!task.error.empty()) out += "<h4>Error</h4>\n" + prose_block(task.error, "error-text");
  out += "<h4>Solution</h4>\n" + source_block(task.solution);
  if (task.solution.text) out += diff_details(task.task.text, *task.solution.text, task.task.note);
  out += "<details class=\"reference\"><summary>Reference task</summary>\n" +
         source_block(task.task) + "</details>\n";
  return out + "</details>\n";
}

}  // namespace

std::string render_bench_report(const BenchRun& run, const ReportAssets& assets,
                                const ReportOptions& options) {
  const std::string title =
      !options.title.empty()
          ? options.title
          : fmt::format("cudal1 bench: {}", run.dir.filename().empty()
                                                ? run.dir.parent_path().filename().string()
                                                : run.dir.filename().string());
  HtmlPage page(title, assets);
  nlohmann::json charts = nlohmann::json::array();
  page.append(header(run, title));
  page.append(summary_section(run));
  page.append(distribution_section(run, charts));
  page.append(task_table(run));
  page.append("<section id=\"details\">\n<h2>Task details</h2>\n");
  for (const auto& task : run.tasks) page.append(task_details(task));
  page.append("</section>\n");
  page.set_data({{"kind", "bench"}, {"charts", charts}});
  return page.render();
}

}  // namespace cudal1::report
