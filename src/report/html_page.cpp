#include "html_page.hpp"

#include <fmt/format.h>

#include <vector>

#include "cudal1/report/html_text.hpp"
#include "page_assets.hpp"

namespace cudal1::report {

HtmlPage::HtmlPage(std::string title, const ReportAssets& assets)
    : title_(std::move(title)), assets_(assets) {
  if (!assets.chart_js.available()) {
    notice(fmt::format("Charts are not drawn: {} ({}) is missing: {}", assets.chart_js.name,
                       assets.chart_js.package, assets.chart_js.problem));
  }
  if (!assets.highlight_js.available()) {
    notice(fmt::format("Code is shown without syntax highlighting: {} ({}) is missing: {}",
                       assets.highlight_js.name, assets.highlight_js.package,
                       assets.highlight_js.problem));
  }
}

void HtmlPage::notice(std::string_view text) {
  notices_ += fmt::format("<p class=\"notice\">{}</p>\n", escape_html(text));
}

std::string HtmlPage::render() const {
  // Every script is one of ours or an inlined library, allowed by its hash: an injected
  // <script> or event handler would not run even if escaping failed somewhere, and nothing can
  // be fetched from the network.
  std::vector<std::string_view> scripts{page_assets::kErrorHook};
  if (assets_.chart_js.available()) scripts.push_back(assets_.chart_js.text);
  if (assets_.highlight_js.available()) scripts.push_back(assets_.highlight_js.text);
  scripts.push_back(page_assets::kReportScript);
  std::string hashes;
  for (const auto script : scripts) hashes += " " + csp_script_hash(script);
  const std::string policy = fmt::format(
      "default-src 'none'; script-src{}; style-src 'unsafe-inline'; img-src data:; "
      "base-uri 'none'; form-action 'none'",
      hashes);

  std::string html;
  html.reserve(body_.size() + assets_.chart_js.text.size() + assets_.highlight_js.text.size() +
               64 * 1024);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n", policy);
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  html += "<meta name=\"generator\" content=\"cudal1 report\">\n";
  html += fmt::format("<title>{}</title>\n", escape_html(title_));
  html += fmt::format("<script>{}</script>\n", page_assets::kErrorHook);
  html += fmt::format("<style>{}</style>\n", page_assets::kReportStyle);
  if (assets_.highlight_css.available())
    html += fmt::format("<style>{}</style>\n", assets_.highlight_css.text);
  html += "</head>\n<body>\n";
  html += "<pre id=\"report-errors\" data-count=\"0\" hidden></pre>\n";
  html += notices_;
  html += body_;
  html += "<p id=\"report-status\">Charts and highlighting need JavaScript.</p>\n";
  html += fmt::format("<script type=\"application/json\" id=\"report-data\">{}</script>\n",
                      json_for_script(data_));
  for (std::size_t i = 1; i < scripts.size(); ++i)
    html += fmt::format("<script>{}</script>\n", scripts[i]);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace cudal1::report
