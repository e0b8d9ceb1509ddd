// The report's own script and style sheets (src/report/assets), compiled into the binary.
#pragma once

#include <string_view>

namespace cudal1::report::page_assets {

extern const std::string_view kErrorHook;     // first script: records errors into the page
extern const std::string_view kReportScript;  // tables, highlighting, charts
extern const std::string_view kReportStyle;

}  // namespace cudal1::report::page_assets
