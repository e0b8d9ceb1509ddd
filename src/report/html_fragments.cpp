#include "html_fragments.hpp"

#include <fmt/format.h>

#include "cudal1/eval/verdict.hpp"
#include "cudal1/report/html_text.hpp"
#include "cudal1/report/line_diff.hpp"

namespace cudal1::report {

std::string format_speedup(std::optional<double> speedup) {
  return speedup ? fmt::format("{:.3f}\u00d7", *speedup) : "\u2013";
}

std::string format_interval(const std::optional<std::array<double, 2>>& interval) {
  return interval ? fmt::format("{:.3f}\u2013{:.3f}", (*interval)[0], (*interval)[1]) : "\u2013";
}

std::string format_percent(std::optional<double> fraction) {
  return fraction ? fmt::format("{:.1f} %", *fraction * 100.0) : "\u2013";
}

std::string format_number(std::optional<double> value, int decimals) {
  return value ? fmt::format("{:.{}f}", *value, decimals) : "\u2013";
}

std::optional<double> number_field(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string number_cell(std::optional<double> value, std::string_view text) {
  return fmt::format("<td class=\"num\" data-value=\"{}\">{}</td>",
                     value ? fmt::format("{}", *value) : "", escape_html(text));
}

std::string roof_cell(std::optional<double> roof) {
  return number_cell(roof, format_percent(roof));
}

std::string text_cell(std::string_view text, std::string_view css_class) {
  if (css_class.empty()) return fmt::format("<td>{}</td>", escape_html(text));
  return fmt::format("<td class=\"{}\">{}</td>", escape_html(css_class), escape_html(text));
}

std::string status_badge(std::string_view status) {
  return fmt::format("<span class=\"status status-{}\">{}</span>", html_id(status),
                     escape_html(status));
}

std::string flag_list(const std::vector<std::string>& flags,
                      const std::vector<std::string>& task_flags) {
  std::string out;
  for (const auto& flag : flags) {
    out += fmt::format("<span class=\"flag{}\"{}>{}</span>", is_reject_flag(flag) ? " reject" : "",
                       is_reject_flag(flag) ? " title=\"a reject flag\"" : "", escape_html(flag));
  }
  for (const auto& flag : task_flags) {
    out += fmt::format("<span class=\"flag task\" title=\"a finding about the task\">{}</span>",
                       escape_html(flag));
  }
  return out;
}

std::string code_block(std::string_view code) {
  return fmt::format("<pre class=\"code\"><code class=\"language-python\">{}</code></pre>\n",
                     escape_html(code));
}

std::string source_block(const SourceFile& file) {
  if (!file.text) return fmt::format("<p class=\"unavailable\">{}</p>\n", escape_html(file.note));
  return code_block(*file.text);
}

namespace {

std::string line_number(std::size_t n) {
  return n ? std::to_string(n) : "";
}

std::string diff_table(const std::vector<DiffHunk>& hunks) {
  std::string out = "<table class=\"diff\"><tbody>\n";
  for (const auto& hunk : hunks) {
    out += fmt::format("<tr class=\"hunk\"><td colspan=\"3\">@@ -{},{} +{},{} @@</td></tr>\n",
                       hunk.old_start, hunk.old_count, hunk.new_start, hunk.new_count);
    for (const auto& line : hunk.lines) {
      const char* row = line.op == DiffOp::kAdded     ? "add"
                        : line.op == DiffOp::kRemoved ? "del"
                                                      : "same";
      const char* mark = line.op == DiffOp::kAdded ? "+" : line.op == DiffOp::kRemoved ? "-" : " ";
      out += fmt::format(
          "<tr class=\"{}\"><td class=\"ln\">{}</td><td class=\"ln\">{}</td>"
          "<td class=\"text\">{}{}</td></tr>\n",
          row, line_number(line.old_line), line_number(line.new_line), mark,
          escape_html(line.text));
    }
  }
  return out + "</tbody></table>\n";
}

}  // namespace

std::string diff_details(const std::optional<std::string>& reference, std::string_view candidate,
                         std::string_view reference_note, bool open) {
  if (!reference) {
    return fmt::format("<p class=\"unavailable\">No diff: the reference is {}</p>\n",
                       escape_html(reference_note));
  }
  const auto diff = diff_lines(split_lines(*reference), split_lines(candidate));
  std::size_t added = 0, removed = 0;
  for (const auto& line : diff) {
    added += line.op == DiffOp::kAdded;
    removed += line.op == DiffOp::kRemoved;
  }
  const auto hunks = group_hunks(diff);
  std::string out = fmt::format(
      "<details class=\"diff\"{}><summary>Diff against the reference task "
      "<span class=\"diff-stats\"><span class=\"add\">+{}</span> "
      "<span class=\"del\">\u2212{}</span> lines</span></summary>\n",
      open ? " open" : "", added, removed);
  out += hunks.empty() ? "<p class=\"unavailable\">identical to the reference</p>\n"
                       : diff_table(hunks);
  return out + "</details>\n";
}

std::string prose_block(std::string_view text, std::string_view css_class) {
  return fmt::format("<pre class=\"{}\">{}</pre>\n", escape_html(css_class), escape_html(text));
}

std::string cell_teaser(std::string_view text, std::size_t limit) {
  const std::size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return "";
  text.remove_prefix(start);
  std::string_view line = text.substr(0, text.find('\n'));
  const bool more_lines = line.size() < text.size();
  if (line.size() <= limit) return std::string(line) + (more_lines ? " \u2026" : "");
  std::size_t cut = limit;
  // Back up to the start of a UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return std::string(line.substr(0, cut)) + "\u2026";
}

}  // namespace cudal1::report
