// Pieces of markup both reports use. Every function escapes what it is given.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/report/run_directory.hpp"

namespace cudal1::report {

// "1.84×", "–" for none.
std::string format_speedup(std::optional<double> speedup);
// "1.80–1.88", "–" for none.
std::string format_interval(const std::optional<std::array<double, 2>>& interval);
// A fraction as "45.5 %"; "–" for none.
std::string format_percent(std::optional<double> fraction);
// "0.512"; "–" for none.
std::string format_number(std::optional<double> value, int decimals = 3);

// A JSON number as an optional (null, absent or another type: none).
std::optional<double> number_field(const nlohmann::json& object, std::string_view key);

// A table cell sorted by `value` and showing `text` (escaped).
std::string number_cell(std::optional<double> value, std::string_view text);
std::string text_cell(std::string_view text, std::string_view css_class = "");
// The share of the memory roof a candidate's calls reach ("78 %"; "–" without a profile).
std::string roof_cell(std::optional<double> roof);

std::string status_badge(std::string_view status);
// Verdict flags (reject flags marked) and task flags (dashed), or "" when none.
std::string flag_list(const std::vector<std::string>& flags,
                      const std::vector<std::string>& task_flags = {});

// <pre><code class="language-python"> for highlight.js.
std::string code_block(std::string_view code);
// The code, or its "not available" note.
std::string source_block(const SourceFile& file);
// A unified diff of `candidate` against `reference` as a table, with +/- counts in a summary
// line; `reference` may be unavailable (then a note says so).
std::string diff_details(const std::optional<std::string>& reference, std::string_view candidate,
                         std::string_view reference_note, bool open = false);
// Free text (an analysis, an error message) kept as written.
std::string prose_block(std::string_view text, std::string_view css_class = "prose");

// A table cell's teaser of `text`: its first non-blank line, at most `limit` bytes (never
// splitting UTF-8), "…" where anything was left out. (common/log_trim's first_line is the plain
// cut that logs and messages use.)
std::string cell_teaser(std::string_view text, std::size_t limit = 160);

}  // namespace cudal1::report
