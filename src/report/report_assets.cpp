#include "cudal1/report/report_assets.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/report/html_text.hpp"

namespace cudal1::report {

namespace fs = std::filesystem;

std::vector<std::string> ReportAssets::missing() const {
  std::vector<std::string> out;
  for (const Asset* asset : {&chart_js, &highlight_js, &highlight_css}) {
    if (!asset->available())
      out.push_back(fmt::format("{} ({}): {}", asset->name, asset->package, asset->problem));
  }
  return out;
}

std::vector<fs::path> default_asset_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("CUDAL1_JS_DIR"); env && *env) {
    std::string_view list(env);
    while (!list.empty()) {
      const std::size_t colon = list.find(':');
      if (colon != 0) dirs.emplace_back(list.substr(0, colon));
      if (colon == std::string_view::npos) break;
      list.remove_prefix(colon + 1);
    }
  }
  dirs.emplace_back("/usr/share/javascript");
  dirs.emplace_back("/usr/share/nodejs");
  return dirs;
}

namespace {

// Where each library may lie under a search folder. Debian 12 ships Chart.js 3 as
// chart.js/chart.min.js and highlight.js 9 as highlight.js/highlight.min.js; later releases and
// the nodejs tree use other names.
struct AssetSpec {
  const char* name;
  const char* package;
  RawText element;  // where it is inlined
  std::vector<const char*> relative_paths;
};

const AssetSpec kChartJs{"Chart.js",
                         "libjs-chart.js",
                         RawText::kScript,
                         {"chart.js/chart.min.js", "chart.js/chart.umd.min.js",
                          "chart.js/chart.umd.js", "chart.js/Chart.min.js", "chart.js/chart.js",
                          "chart.js/dist/chart.umd.js", "chart.js/dist/chart.min.js"}};
const AssetSpec kHighlightJs{"highlight.js",
                             "libjs-highlight.js",
                             RawText::kScript,
                             {"highlight.js/highlight.min.js", "highlight.js/highlight.js",
                              "highlight.js/lib/highlight.min.js"}};
const AssetSpec kHighlightCss{"highlight.js style",
                              "libjs-highlight.js",
                              RawText::kStyle,
                              {"highlight.js/styles/github.css", "highlight.js/styles/default.css",
                               "highlight.js/styles/github.min.css"}};

// Reads `path`; the problem when it cannot be used, empty when it can.
std::string read_asset(const fs::path& path, RawText element, Asset& asset) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return fmt::format("{} does not exist", path.string());
  try {
    asset.text = read_file(path);
  } catch (const std::exception& e) {
    return fmt::format("cannot read {}: {}", path.string(), e.what());
  }
  if (!can_inline(asset.text, element)) {
    return fmt::format("{} contains {} and cannot be inlined safely", path.string(),
                       element == RawText::kScript ? "</script or <!--" : "</style");
  }
  asset.path = path;
  return "";
}

Asset find_asset(const AssetSpec& spec, const std::optional<fs::path>& explicit_path,
                 const std::vector<fs::path>& dirs, const char* option) {
  Asset asset;
  asset.name = spec.name;
  asset.package = spec.package;
  if (explicit_path) {
    if (const std::string problem = read_asset(*explicit_path, spec.element, asset);
        !problem.empty()) {
      throw InputError(fmt::format("{} {}: {}", option, explicit_path->string(), problem));
    }
    return asset;
  }
  std::vector<std::string> looked;
  for (const auto& dir : dirs) {
    for (const char* relative : spec.relative_paths) {
      const fs::path path = dir / relative;
      std::error_code ec;
      if (!fs::is_regular_file(path, ec)) continue;
      if (const std::string problem = read_asset(path, spec.element, asset); problem.empty())
        return asset;
      else
        looked.push_back(problem);
    }
  }
  std::string searched;
  for (const auto& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir.string();
  asset.text.clear();
  asset.problem = looked.empty() ? fmt::format("not found in {} (install {} or pass {} FILE)",
                                               searched, spec.package, option)
                                 : looked.front();
  return asset;
}

}  // namespace

ReportAssets load_report_assets(const AssetOptions& options) {
  const std::vector<fs::path> dirs =
      options.search_dirs.empty() ? default_asset_dirs() : options.search_dirs;
  ReportAssets assets;
  assets.chart_js = find_asset(kChartJs, options.chart_js, dirs, "--chart-js");
  assets.highlight_js = find_asset(kHighlightJs, options.highlight_js, dirs, "--highlight-js");
  assets.highlight_css = find_asset(kHighlightCss, options.highlight_css, dirs, "--highlight-css");
  return assets;
}

}  // namespace cudal1::report
