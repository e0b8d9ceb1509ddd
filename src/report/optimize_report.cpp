// The report of a cudal1 optimize run directory.
#include <fmt/format.h>

#include <algorithm>

#include "cudal1/report/html_report.hpp"
#include "cudal1/report/html_text.hpp"
#include "html_fragments.hpp"
#include "html_page.hpp"

namespace cudal1::report {
namespace {

std::string candidate_anchor(std::int64_t id) {
  return fmt::format("candidate-{}", id);
}

std::string text_of(const nlohmann::json& summary, const char* key) {
  const auto it = summary.find(key);
  if (it == summary.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string header(const OptimizeRun& run, const std::string& title) {
  const auto& s = run.summary;
  std::string out = fmt::format("<header>\n<h1>{}</h1>\n", escape_html(title));
  auto meta = [&out](std::string_view label, const std::string& text) {
    if (!text.empty())
      out += fmt::format("<p class=\"meta\">{}: <code>{}</code></p>\n", label, escape_html(text));
  };
  meta("Task", text_of(s, "task"));
  meta("Model", text_of(s, "model"));
  meta("LLM", text_of(s, "llm"));
  meta("Started", text_of(s, "created_at"));
  meta("Stopped because", text_of(s, "stop_reason"));
  meta("Run directory", run.dir.string());
  return out + "</header>\n";
}

std::string fact_row(std::string_view label, const std::string& value) {
  return fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", escape_html(label), escape_html(value));
}

std::string summary_section(const OptimizeRun& run) {
  const auto& s = run.summary;
  auto integer = [&s](const char* key) {
    const auto value = number_field(s, key);
    return value ? fmt::format("{:.0f}", *value) : std::string("\u2013");
  };
  std::string out = "<section id=\"summary\">\n<h2>Summary</h2>\n<table class=\"facts\"><tbody>\n";
  out += fact_row("Best verified speedup", format_speedup(number_field(s, "best_speedup")));
  out += fact_row("Best candidate", text_of(s, "best_candidate_id").empty()
                                        ? "none verified yet"
                                        : "candidate " + text_of(s, "best_candidate_id"));
  out += fact_row("Rounds", integer("rounds") + " of " + integer("rounds_planned") + " planned");
  out += fact_row("Candidates", integer("candidates"));
  out += fact_row("Evaluations", integer("evaluations"));
  out += fact_row("Tokens", integer("prompt_tokens") + " prompt + " + integer("completion_tokens") +
                                " completion");
  out += fact_row("Prompts pending / failed",
                  integer("pending_prompts") + " / " + integer("failed_prompts"));
  std::string statuses;
  if (s.contains("statuses") && s["statuses"].is_object()) {
    for (const auto& [status, count] : s["statuses"].items())
      statuses += (statuses.empty() ? "" : ", ") + status + " " + count.dump();
  }
  out += fact_row("Verdicts", statuses.empty() ? "none yet" : statuses);
  out += "</tbody></table>\n";

  out +=
      "<h3>Rounds</h3>\n<div class=\"table-wrap\"><table class=\"rounds\"><thead><tr>"
      "<th class=\"num\">Round</th><th class=\"num\">Prompts</th><th class=\"num\">Answered</th>"
      "<th class=\"num\">Failed</th><th class=\"num\">Verified</th>"
      "<th class=\"num\">Best of round</th><th class=\"num\">Best so "
      "far</th></tr></thead><tbody>\n";
  for (const auto& round : s["per_round"]) {
    auto n = [&round](const char* key) { return number_field(round, key); };
    out += "<tr>";
    for (const char* key : {"round", "prompts", "answered", "failed", "ok"})
      out += number_cell(n(key), format_number(n(key), 0));
    out += number_cell(n("best_speedup"), format_speedup(n("best_speedup")));
    out += number_cell(n("best_speedup_so_far"), format_speedup(n("best_speedup_so_far")));
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n</section>\n";
}

// The best verified speedup after each round, with every verified candidate's speedup.
std::string rounds_chart(const OptimizeRun& run, nlohmann::json& charts) {
  nlohmann::json best = nlohmann::json::array();
  int first = 0, last = 0;
  for (const auto& round : run.summary["per_round"]) {
    const int number = round.value("round", 0);
    first = first == 0 ? number : std::min(first, number);
    last = std::max(last, number);
    if (const auto so_far = number_field(round, "best_speedup_so_far"); so_far && *so_far > 0)
      best.push_back({{"x", number}, {"y", *so_far}, {"label", fmt::format("round {}", number)}});
  }
  nlohmann::json points = nlohmann::json::array();
  for (const auto& c : run.candidates) {
    if (c.status == "ok" && c.speedup && *c.speedup > 0 && !c.duplicate_of)
      points.push_back(
          {{"x", c.round}, {"y", *c.speedup}, {"label", fmt::format("candidate {}", c.id)}});
  }
  std::string out = "<section id=\"progress\">\n<h2>Best speedup over rounds</h2>\n";
  if (best.empty() && points.empty()) {
    return out +
           "<p class=\"unavailable\">No candidate has been verified yet: nothing to plot.</p>\n"
           "</section>\n";
  }
  charts.push_back({{"canvas", "chart-rounds"},
                    {"type", "rounds"},
                    {"title", "Verified speedups by round"},
                    {"best_so_far", best},
                    {"candidates", points},
                    {"first_round", first},
                    // One round still needs a visible x range.
                    {"last_round", std::max(last, first + 1)}});
  out +=
      "<div class=\"chart wide\"><canvas id=\"chart-rounds\" role=\"img\" "
      "aria-label=\"best speedup over rounds\"></canvas></div>\n";
  if (!run.has_candidates_file) {
    out +=
        "<p class=\"chart-note\">Only the best per round is plotted: this run directory has "
        "no candidates.jsonl.</p>\n";
  }
  return out + "</section>\n";
}

std::string candidate_facts(const OptimizeCandidate& c) {
  std::string out = "<dl class=\"facts\">";
  out += fmt::format("<dt>Round</dt><dd>{}</dd><dt>Status</dt><dd>{}</dd>", c.round,
                     status_badge(c.status));
  out += fmt::format("<dt>Speedup</dt><dd>{} (95 % CI {})</dd>",
                     escape_html(format_speedup(c.speedup)),
                     escape_html(format_interval(c.speedup_ci)));
  if (!c.flags.empty()) out += fmt::format("<dt>Flags</dt><dd>{}</dd>", flag_list(c.flags));
  if (!c.profile_summary.empty())
    out += fmt::format("<dt>Profile</dt><dd>{}</dd>", escape_html(c.profile_summary));
  if (c.duplicate_of)
    out += fmt::format("<dt>Same code as</dt><dd><a href=\"#{}\">candidate {}</a></dd>",
                       candidate_anchor(*c.duplicate_of), *c.duplicate_of);
  return out + "</dl>\n";
}

std::string analysis_block(const OptimizeCandidate& c) {
  if (c.analysis.empty())
    return "<p class=\"unavailable\">The reply had no performance analysis.</p>\n";
  return prose_block(c.analysis);
}

std::string best_section(const OptimizeRun& run) {
  std::string out = "<section id=\"best\">\n<h2>Best candidate</h2>\n";
  const OptimizeCandidate* best = run.best_candidate();
  if (best) {
    out += candidate_facts(*best);
    out += "<h3>The model's performance analysis</h3>\n" + analysis_block(*best);
  } else if (run.best.text && !run.has_candidates_file) {
    out +=
        "<p class=\"unavailable\">The analysis is not available: this run directory has no "
        "candidates.jsonl (written by cudal1 optimize since the report was added).</p>\n";
  }
  out += "<h3>Code</h3>\n" + source_block(run.best);
  if (run.best.text)
    out += diff_details(run.reference.text, *run.best.text, run.reference.note, true);
  out += "<details class=\"reference\"><summary>Reference task</summary>\n" +
         source_block(run.reference) + "</details>\n";
  return out + "</section>\n";
}

std::string candidates_section(const OptimizeRun& run) {
  std::string out = "<section id=\"candidates\">\n<h2>Candidates</h2>\n";
  if (!run.has_candidates_file) {
    return out +
           "<p class=\"unavailable\">Not available: this run directory has no "
           "candidates.jsonl (run cudal1 optimize --db FILE --resume with a current cudal1 "
           "to write it).</p>\n</section>\n";
  }
  out +=
      "<p class=\"meta\">Every evaluated reply of the model. Click a header to sort, a "
      "candidate for its analysis and code.</p>\n"
      "<div class=\"table-wrap\"><table class=\"sortable candidates\" id=\"candidate-table\">"
      "<thead><tr><th data-type=\"number\" class=\"num\">Candidate</th>"
      "<th data-type=\"number\" class=\"num\">Round</th><th data-type=\"text\">Status</th>"
      "<th data-type=\"text\">Flags</th><th data-type=\"number\" class=\"num\">Speedup</th>"
      "<th data-type=\"number\" class=\"num\">95 % CI</th>"
      "<th data-type=\"number\" class=\"num\" title=\"the nearer of two roofs: the bytes a call "
      "must "
      "move over its time against the device's measured bandwidth, and the reference's arithmetic "
      "over its time against the measured matmul throughput (above 100 %: less arithmetic than "
      "the reference)\">Of roof</th>"
      "<th data-type=\"text\">Error</th>"
      "</tr></thead><tbody>\n";
  for (const auto& c : run.candidates) {
    out += "<tr>";
    out += fmt::format("<td class=\"num\" data-value=\"{}\"><a href=\"#{}\">{}</a></td>", c.id,
                       candidate_anchor(c.id), c.id);
    out += number_cell(c.round, std::to_string(c.round));
    out +=
        fmt::format("<td data-value=\"{}\">{}</td>", escape_html(c.status), status_badge(c.status));
    out += fmt::format("<td>{}</td>", flag_list(c.flags));
    out += number_cell(c.speedup, format_speedup(c.speedup));
    out += number_cell(c.speedup_ci ? std::optional<double>((*c.speedup_ci)[0]) : std::nullopt,
                       format_interval(c.speedup_ci));
    out += roof_cell(c.roof);
    out += text_cell(cell_teaser(c.error), "error-cell");
    out += "</tr>\n";
  }
  out += "</tbody></table></div>\n<h3>Analyses and code</h3>\n";
  const OptimizeCandidate* best = run.best_candidate();
  for (const auto& c : run.candidates) {
    out += fmt::format(
        "<details class=\"candidate\" id=\"{}\"><summary>Candidate {}{} \u00b7 round {} {} "
        "{}</summary>\n",
        candidate_anchor(c.id), c.id, &c == best ? " (best)" : "", c.round, status_badge(c.status),
        escape_html(format_speedup(c.speedup)));
    out += candidate_facts(c);
    out += "<h4>Performance analysis</h4>\n" + analysis_block(c);
    if (!c.error.empty()) out += "<h4>Error</h4>\n" + prose_block(c.error, "error-text");
    if (c.code.empty()) {
      out += "<p class=\"unavailable\">No code could be read from the reply.</p>\n";
    } else {
      out += "<h4>Code</h4>\n" + code_block(c.code);
      out += diff_details(run.reference.text, c.code, run.reference.note);
    }
    out += "</details>\n";
  }
  return out + "</section>\n";
}

}  // namespace

std::string render_optimize_report(const OptimizeRun& run, const ReportAssets& assets,
                                   const ReportOptions& options) {
  const std::string task_name = text_of(run.summary, "task_name");
  const std::string title =
      !options.title.empty()
          ? options.title
          : fmt::format("cudal1 optimize run {}{}", text_of(run.summary, "run_id"),
                        task_name.empty() ? "" : ": " + task_name);
  HtmlPage page(title, assets);
  if (!run.has_candidates_file) {
    page.notice(
        fmt::format("{} has no candidates.jsonl: the per-candidate table and the model's "
                    "analyses are not shown.",
                    run.dir.string()));
  }
  nlohmann::json charts = nlohmann::json::array();
  page.append(header(run, title));
  page.append(summary_section(run));
  page.append(rounds_chart(run, charts));
  page.append(best_section(run));
  page.append(candidates_section(run));
  page.set_data({{"kind", "optimize"}, {"charts", charts}});
  return page.render();
}

}  // namespace cudal1::report
