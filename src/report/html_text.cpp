#include "cudal1/report/html_text.hpp"

#include <algorithm>
#include <cctype>

#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::report {

std::string escape_html(std::string_view text) {
  const std::string clean = sanitize_utf8(text);
  std::string out;
  out.reserve(clean.size() + clean.size() / 8);
  for (const char c : clean) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      // A NUL in text content is a parse error; show it as the replacement character.
      case '\0':
        out += "&#xFFFD;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string json_for_script(const nlohmann::json& value) {
  const std::string json = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(json.size() + 64);
  // In JSON text these characters can only occur inside strings, where \uXXXX means the same.
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < json.size() && json[i + 1] == '\x80' &&
               (json[i + 2] == '\xA8' || json[i + 2] == '\xA9')) {
      // U+2028 and U+2029 end a line in older JavaScript parsers.
      out += json[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

bool can_inline(std::string_view code, RawText element) {
  std::string lower(code);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (element == RawText::kStyle) return lower.find("</style") == std::string::npos;
  return lower.find("</script") == std::string::npos && lower.find("<!--") == std::string::npos;
}

namespace {

std::string base64(const std::uint8_t* data, std::size_t size) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < size; i += 3) {
    const std::uint32_t chunk = (std::uint32_t{data[i]} << 16) |
                                (i + 1 < size ? std::uint32_t{data[i + 1]} << 8 : 0) |
                                (i + 2 < size ? std::uint32_t{data[i + 2]} : 0);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < size ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < size ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

}  // namespace

std::string csp_script_hash(std::string_view script_text) {
  const auto digest = Sha256().update(script_text).digest();
  return "'sha256-" + base64(digest.data(), digest.size()) + "'";
}

std::string html_id(std::string_view text) {
  std::string id;
  for (const char c : text) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    id += plain ? c : '-';
  }
  return id;
}

}  // namespace cudal1::report
