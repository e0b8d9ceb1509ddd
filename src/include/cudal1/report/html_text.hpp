// Putting untrusted text into an HTML page. Everything a report shows from result files
// (candidate code, error messages, the model's analysis, even task names) was written by a
// program we do not trust, so it enters the page only through these functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cudal1::report {

// Text content or a quoted attribute value: & < > " ' become character references; bytes
// that are not UTF-8 become '?'.
std::string escape_html(std::string_view text);

// JSON for a `<script type="application/json">` data block: `<`, `>` and `&` are written as
// \u003c, \u003e, \u0026 (so neither `</script>` nor `<!--` can appear) and U+2028/U+2029 as
// escapes; invalid UTF-8 becomes U+FFFD. JSON.parse of the element's text gives `value` back.
std::string json_for_script(const nlohmann::json& value);

enum class RawText { kScript, kStyle };

// Whether `code` can sit unchanged inside a <script> (or <style>) element: false when it
// contains, in any letter case, `</script` (`</style`), which would end the element early, or
// for a script `<!--`, which changes how the parser reads what follows.
bool can_inline(std::string_view code, RawText element);

// The Content-Security-Policy source expression that allows exactly this inline script:
// 'sha256-<base64 of the SHA-256 of its text>'.
std::string csp_script_hash(std::string_view script_text);

// A fragment identifier made of [A-Za-z0-9_-] only (other bytes become '-').
std::string html_id(std::string_view text);

}  // namespace cudal1::report
