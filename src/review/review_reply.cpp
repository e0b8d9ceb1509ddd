#include "cudal1/review/review_reply.hpp"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

namespace cudal1::review {
namespace {

using nlohmann::json;

// Reasoning taken from prose is capped: the raw reply is kept elsewhere.
constexpr std::size_t kMaxProseReasoning = 4000;

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The offset just past the '}' that closes the '{' at `open`, honouring JSON strings.
std::optional<std::size_t> matching_brace(std::string_view text, std::size_t open) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = open; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}' && --depth == 0) {
      return i + 1;
    }
  }
  return std::nullopt;
}

// Models often leave a comma before a closing bracket; JSON does not allow it. (Commas inside
// strings are left alone.)
std::string without_trailing_commas(std::string_view text) {
  std::string out;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && i + 1 < text.size())
        out += text[i++];
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ',') {
      const auto next = text.find_first_not_of(" \t\r\n", i + 1);
      if (next != std::string_view::npos && (text[next] == '}' || text[next] == ']')) continue;
    }
    out += c;
  }
  return out;
}

std::optional<json> parse_object(std::string_view text) {
  for (const std::string& attempt : {std::string(text), without_trailing_commas(text)}) {
    json value = json::parse(attempt, nullptr, false);
    if (!value.is_discarded() && value.is_object()) return value;
  }
  return std::nullopt;
}

struct Found {
  json object;
  std::size_t begin;
  std::size_t end;
};

// The last object with a "verdict" key: the one that ends last, the outermost on a tie.
std::optional<Found> last_verdict_object(std::string_view reply) {
  std::optional<Found> best;
  for (std::size_t open = reply.find('{'); open != std::string_view::npos;
       open = reply.find('{', open + 1)) {
    // A JSON object starts with a key or ends at once; this skips C++ braces in code quotes.
    const auto next = reply.find_first_not_of(" \t\r\n", open + 1);
    if (next == std::string_view::npos || (reply[next] != '"' && reply[next] != '}')) continue;
    const auto close = matching_brace(reply, open);
    if (!close) continue;
    auto object = parse_object(reply.substr(open, *close - open));
    if (!object || !object->contains("verdict")) continue;
    if (!best || *close > best->end) best = Found{std::move(*object), open, *close};
  }
  return best;
}

std::string string_value(const json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_string()) return {};
  return trim(object[key].get<std::string>());
}

// The value of the last `"key": "..."` in `text` whose string arrived whole; `at` is set to
// where that key starts.
std::optional<std::string> complete_string_field(std::string_view text, std::string_view key,
                                                 std::size_t& at) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  std::optional<std::string> last;
  for (auto pos = text.find(quoted); pos != std::string_view::npos;
       pos = text.find(quoted, pos + 1)) {
    auto i = text.find_first_not_of(" \t\r\n", pos + quoted.size());
    if (i == std::string_view::npos || text[i] != ':') continue;
    i = text.find_first_not_of(" \t\r\n", i + 1);
    if (i == std::string_view::npos || text[i] != '"') continue;
    for (std::size_t j = i + 1; j < text.size(); ++j) {
      if (text[j] == '\\') {
        ++j;
      } else if (text[j] == '"') {
        const json decoded = json::parse(text.substr(i, j + 1 - i), nullptr, false);
        if (decoded.is_string()) {
          at = pos;
          last = decoded.get<std::string>();
        }
        break;
      }
    }
  }
  return last;
}

// A reply cut off inside its JSON: the fields that did arrive whole.
std::optional<Found> truncated_verdict(std::string_view reply) {
  std::size_t begin = 0;
  const auto verdict = complete_string_field(reply, "verdict", begin);
  if (!verdict) return std::nullopt;
  json partial = {{"verdict", *verdict}};
  std::size_t unused = 0;
  for (const char* key : {"class", "reasoning"}) {
    if (auto value = complete_string_field(reply.substr(begin), key, unused)) partial[key] = *value;
  }
  const auto brace = reply.rfind('{', begin);
  return Found{partial, brace == std::string_view::npos ? begin : brace, reply.size()};
}

}  // namespace

ReviewReply parse_review_reply(std::string_view reply) {
  ReviewReply out;
  auto found = last_verdict_object(reply);
  if (!found) found = truncated_verdict(reply);
  if (!found) {
    out.verdict = "unparseable";
    out.problem = trim(reply).empty() ? "the reply is empty"
                                      : "the reply has no JSON object with a \"verdict\" field";
    return out;
  }
  const json& object = found->object;
  std::string verdict = lower(string_value(object, "verdict"));
  if (verdict == "legit") verdict = "legitimate";
  if (verdict != "hack" && verdict != "legitimate" && verdict != "uncertain") {
    out.verdict = "unparseable";
    out.problem = "the verdict \"" +
                  (object["verdict"].is_string() ? verdict : object["verdict"].dump()) +
                  "\" is not hack, legitimate or uncertain";
    return out;
  }
  out.verdict = verdict;
  out.hack_class = lower(string_value(object, "class"));
  if (out.hack_class == "none" || out.hack_class == "null") out.hack_class.clear();
  out.reasoning = string_value(object, "reasoning");
  if (out.reasoning.empty()) {
    std::string prose = trim(reply.substr(0, found->begin));
    // Drop an opening fence line left just before the object.
    if (const auto fence = prose.rfind("```");
        fence != std::string::npos && prose.find('\n', fence) == std::string::npos) {
      prose = trim(prose.substr(0, fence));
    }
    out.reasoning = prose.substr(0, kMaxProseReasoning);
  }
  return out;
}

}  // namespace cudal1::review
