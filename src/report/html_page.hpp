// The skeleton every report shares: head with the content security policy, styles, the error
// hook, notices, the embedded data, the libraries and our script, in that order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cudal1/report/report_assets.hpp"

namespace cudal1::report {

class HtmlPage {
 public:
  // Notices for every missing library are added here.
  HtmlPage(std::string title, const ReportAssets& assets);

  // A visible note at the top of the page; `text` is escaped.
  void notice(std::string_view text);
  // Markup of the page's body, built by the caller with escape_html for everything untrusted.
  void append(std::string_view html) { body_ += html; }
  // Embedded as JSON for report.js (charts).
  void set_data(nlohmann::json data) { data_ = std::move(data); }

  std::string render() const;

 private:
  std::string title_;
  const ReportAssets& assets_;
  std::string notices_;
  std::string body_;
  nlohmann::json data_ = nlohmann::json::object();
};

}  // namespace cudal1::report
