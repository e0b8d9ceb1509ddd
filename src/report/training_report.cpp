// The training view: the rewards a reward server (cudal1 serve) gave its trainer, per step.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "cudal1/report/html_report.hpp"
#include "cudal1/report/html_text.hpp"
#include "html_fragments.hpp"
#include "html_page.hpp"

namespace cudal1::report {
namespace {

using nlohmann::json;

// Lines beyond this many tasks make the chart unreadable; the table below it lists every task.
constexpr std::size_t kTasksCharted = 10;

constexpr const char* kBlue = "#2b6cb0";
constexpr const char* kGreen = "#2f855a";
constexpr const char* kRed = "#c53030";
// Distinct colours for the tasks' lines, cycled.
constexpr const char* kPalette[] = {"#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b7791f",
                                    "#c53030", "#2c7a7b", "#97266d", "#4a5568", "#276749"};

// A reward's mean per step with its spread as a band (mean ± deviation).
json reward_series(const TrainingRun& run, bool smoothed, const char* label, const char* color) {
  json points = json::array(), band = json::array();
  for (const auto& step : run.steps) {
    const rl::WindowStats& s = smoothed ? step.smoothed : step.raw;
    points.push_back({{"x", step.x}, {"y", s.mean}, {"label", step.label}});
    band.push_back({{"x", step.x}, {"low", s.mean - s.deviation}, {"high", s.mean + s.deviation}});
  }
  return {{"label", label}, {"color", color}, {"points", points}, {"band", band}};
}

json fraction_series(const TrainingRun& run, bool rejected, const char* label, const char* color) {
  json points = json::array();
  for (const auto& step : run.steps)
    points.push_back(
        {{"x", step.x}, {"y", rejected ? step.rejected : step.ok}, {"label", step.label}});
  return {{"label", label}, {"color", color}, {"points", points}};
}

std::string x_title(const TrainingRun& run) {
  return run.by_step ? "trainer step" : "request (in the order rewards were given)";
}

std::string chart_canvas(const std::string& id, const std::string& label) {
  return fmt::format(
      "<div class=\"chart wide\"><canvas id=\"{}\" role=\"img\" "
      "aria-label=\"{}\"></canvas></div>\n",
      id, escape_html(label));
}

std::string header(const TrainingRun& run, const std::string& title) {
  std::string out = fmt::format("<header>\n<h1>{}</h1>\n", escape_html(title));
  out += fmt::format("<p class=\"meta\">Store: <code>{}</code></p>\n", escape_html(run.source));
  out +=
      fmt::format("<p class=\"meta\">{} rewards over {} {} and {} tasks; {}.</p>\n", run.rewards,
                  run.steps.size(), run.by_step ? "steps" : "steps or requests", run.tasks.size(),
                  run.by_step ? "every request named its trainer step"
                              : "rewards of requests without a step are grouped by request");
  return out + "</header>\n";
}

std::string reward_section(const TrainingRun& run, json& charts) {
  std::string out =
      "<section id=\"rewards\">\n<h2>Reward per step</h2>\n"
      "<p class=\"chart-note\">The line is the mean of the step's rewards, the band one standard "
      "deviation either side. Raw rewards are the verified speedups (the floor for failures and "
      "hacks); smoothed rewards are what the trainer got (each task's rolling z-score, "
      "clipped).</p>\n";
  const std::pair<bool, const char*> kinds[] = {{false, "raw"}, {true, "smoothed"}};
  for (const auto& [smoothed, name] : kinds) {
    const std::string canvas = fmt::format("chart-reward-{}", name);
    charts.push_back(
        {{"canvas", canvas},
         {"type", "series"},
         {"title",
          fmt::format("{} reward per step: mean and spread", smoothed ? "Smoothed" : "Raw")},
         {"x_title", x_title(run)},
         {"y_title", fmt::format("{} reward", name)},
         {"series", json::array({reward_series(
                        run, smoothed, smoothed ? "smoothed reward, mean" : "raw reward, mean",
                        smoothed ? kGreen : kBlue)})}});
    out += chart_canvas(canvas, fmt::format("{} reward per step", name));
  }
  return out + "</section>\n";
}

std::string status_section(const TrainingRun& run, json& charts) {
  charts.push_back(
      {{"canvas", "chart-status"},
       {"type", "series"},
       {"title", "Completions rejected and verified per step"},
       {"x_title", x_title(run)},
       {"y_title", "fraction of the step's completions"},
       {"y_min", 0},
       {"y_max", 1},
       {"series", json::array({fraction_series(run, true, "rejected (a hack)", kRed),
                               fraction_series(run, false, "ok (verified)", kGreen)})}});
  return "<section id=\"statuses\">\n<h2>Rejected and verified completions</h2>\n"
         "<p class=\"chart-note\">A rising share of rejected completions means the policy is "
         "probing the reward: the defenses catch it, but it is worth a look at what it "
         "tries.</p>\n" +
         chart_canvas("chart-status", "fractions of rejected and verified completions per step") +
         "</section>\n";
}

std::string best_section(const TrainingRun& run, json& charts) {
  std::vector<const TaskProgress*> charted;
  for (const auto& task : run.tasks)
    if (task.best_speedup) charted.push_back(&task);
  std::stable_sort(charted.begin(), charted.end(),
                   [](const TaskProgress* a, const TaskProgress* b) {
                     return *a->best_speedup > *b->best_speedup;
                   });
  const std::size_t verified = charted.size();
  if (charted.size() > kTasksCharted) charted.resize(kTasksCharted);
  std::string out = "<section id=\"tasks\">\n<h2>Best verified speedup per task so far</h2>\n";
  if (charted.empty()) {
    out += "<p class=\"unavailable\">No completion has been verified yet: nothing to plot.</p>\n";
  } else {
    json series = json::array();
    const double last_x = run.steps.back().x;
    for (std::size_t i = 0; i < charted.size(); ++i) {
      json points = json::array();
      for (const auto& [x, speedup] : charted[i]->best_so_far)
        points.push_back({{"x", x}, {"y", speedup}, {"label", charted[i]->task}});
      // Held to the last step, so a line shows how long its best has stood.
      points.push_back({{"x", last_x},
                        {"y", charted[i]->best_so_far.back().second},
                        {"label", charted[i]->task}});
      series.push_back({{"label", charted[i]->task},
                        {"color", kPalette[i % std::size(kPalette)]},
                        {"points", points}});
    }
    charts.push_back({{"canvas", "chart-best"},
                      {"type", "series"},
                      {"title", "Best verified speedup so far"},
                      {"x_title", x_title(run)},
                      {"y_title", "speedup over the reference (log scale)"},
                      {"y_log", true},
                      {"stepped", true},
                      {"series", series}});
    out += chart_canvas("chart-best", "best verified speedup per task over the steps");
    if (verified > charted.size()) {
      out += fmt::format(
          "<p class=\"chart-note\">The {} fastest of {} tasks with a verified speedup are "
          "plotted; the table lists every task.</p>\n",
          charted.size(), verified);
    }
  }
  out +=
      "<div class=\"table-wrap\"><table class=\"sortable\" id=\"task-table\"><thead><tr>"
      "<th data-type=\"text\">Task</th><th data-type=\"number\" class=\"num\">Rewards</th>"
      "<th data-type=\"number\" class=\"num\">Verified</th>"
      "<th data-type=\"number\" class=\"num\">Rejected</th>"
      "<th data-type=\"number\" class=\"num\">Best speedup</th><th data-type=\"text\">First "
      "reached at</th></tr></thead><tbody>\n";
  for (const auto& task : run.tasks) {
    out += "<tr>" + text_cell(task.task);
    out += number_cell(static_cast<double>(task.rewards), std::to_string(task.rewards));
    out += number_cell(task.ok, format_percent(task.ok));
    out += number_cell(task.rejected, format_percent(task.rejected));
    out += number_cell(task.best_speedup, format_speedup(task.best_speedup));
    out += text_cell(task.best_at) + "</tr>\n";
  }
  return out + "</tbody></table></div>\n</section>\n";
}

std::string step_table(const TrainingRun& run) {
  std::string out =
      "<section id=\"steps\">\n<details class=\"steps\"><summary>Every step</summary>\n"
      "<div class=\"table-wrap\"><table class=\"sortable\" id=\"step-table\"><thead><tr>"
      "<th data-type=\"number\" class=\"num\">X</th><th data-type=\"text\">Step</th>"
      "<th data-type=\"number\" class=\"num\">Rewards</th>"
      "<th data-type=\"number\" class=\"num\">Raw mean</th>"
      "<th data-type=\"number\" class=\"num\">Raw sd</th>"
      "<th data-type=\"number\" class=\"num\">Smoothed mean</th>"
      "<th data-type=\"number\" class=\"num\">Smoothed sd</th>"
      "<th data-type=\"number\" class=\"num\">Verified</th>"
      "<th data-type=\"number\" class=\"num\">Rejected</th></tr></thead><tbody>\n";
  for (const auto& step : run.steps) {
    out += "<tr>" + number_cell(step.x, format_number(step.x, 0)) + text_cell(step.label);
    out += number_cell(static_cast<double>(step.rewards), std::to_string(step.rewards));
    for (const double value :
         {step.raw.mean, step.raw.deviation, step.smoothed.mean, step.smoothed.deviation})
      out += number_cell(value, format_number(value));
    out += number_cell(step.ok, format_percent(step.ok));
    out += number_cell(step.rejected, format_percent(step.rejected)) + "</tr>\n";
  }
  return out + "</tbody></table></div>\n</details>\n</section>\n";
}

}  // namespace

std::string render_training_report(const TrainingRun& run, const ReportAssets& assets,
                                   const ReportOptions& options) {
  const std::string title =
      !options.title.empty() ? options.title : "cudal1 training: rewards given to the trainer";
  HtmlPage page(title, assets);
  json charts = json::array();
  page.append(header(run, title));
  if (run.steps.empty()) {
    page.append(
        "<section id=\"rewards\">\n<p class=\"unavailable\">The store holds no rewards yet: "
        "cudal1 serve records every reward it gives a trainer there.</p>\n</section>\n");
  } else {
    page.append(reward_section(run, charts));
    page.append(status_section(run, charts));
    page.append(best_section(run, charts));
    page.append(step_table(run));
  }
  page.set_data({{"kind", "training"}, {"charts", charts}});
  return page.render();
}

}  // namespace cudal1::report
