// The JavaScript and CSS libraries a report inlines (Debian's libjs-chart.js and
// libjs-highlight.js), found at run time. The page works offline: nothing is fetched.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::report {

struct AssetOptions {
  // Folders searched for chart.js/... and highlight.js/... (default_asset_dirs() when empty).
  std::vector<std::filesystem::path> search_dirs;
  // Explicit files; a file given here that cannot be used is an input error.
  std::optional<std::filesystem::path> chart_js;
  std::optional<std::filesystem::path> highlight_js;
  std::optional<std::filesystem::path> highlight_css;
};

struct Asset {
  std::string name;                           // "Chart.js", "highlight.js", "highlight.js style"
  std::string package;                        // the Debian package that ships it
  std::optional<std::filesystem::path> path;  // where it was read from
  std::string text;                           // its content, when available
  std::string problem;                        // why it is not available

  bool available() const { return path.has_value(); }
};

struct ReportAssets {
  Asset chart_js;
  Asset highlight_js;
  Asset highlight_css;

  // "Chart.js (libjs-chart.js): not found in /usr/share/javascript" for each missing one.
  std::vector<std::string> missing() const;
};

// $CUDAL1_JS_DIR (colon-separated) if set, then /usr/share/javascript and /usr/share/nodejs.
std::vector<std::filesystem::path> default_asset_dirs();

// Finds and reads the libraries. One that is not found is left unavailable (the report then
// says so and degrades); an explicit file that is missing, unreadable or cannot be inlined
// safely throws InputError naming it.
ReportAssets load_report_assets(const AssetOptions& options);

}  // namespace cudal1::report
