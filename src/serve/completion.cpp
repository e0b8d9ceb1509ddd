#include "cudal1/serve/completion.hpp"

#include "cudal1/search/response_parser.hpp"

namespace cudal1::serve {
namespace {

// Long enough to be unique in any query (a prompt ends with the task's instructions), short
// enough to lie in the part of a prompt that tokenizers give back unchanged.
constexpr std::size_t kAnchorChars = 200;

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace

std::optional<std::string> completion_of_query(std::string_view query, std::string_view prompt) {
  if (prompt.empty()) return std::string(query);
  if (query.substr(0, prompt.size()) == prompt) return std::string(query.substr(prompt.size()));
  std::string_view anchor = trimmed(prompt);
  if (anchor.empty()) return std::string(query);
  if (anchor.size() > kAnchorChars) anchor = anchor.substr(anchor.size() - kAnchorChars);
  // The first occurrence: a completion that repeats the instructions must not lose its code.
  const auto at = query.find(anchor);
  if (at == std::string_view::npos) return std::nullopt;
  return std::string(query.substr(at + anchor.size()));
}

ExtractedCode code_of_completion(std::string_view completion) {
  const search::ParsedReply parsed = search::parse_reply(completion);
  ExtractedCode out;
  out.ok = parsed.ok;
  out.code = parsed.code;
  out.analysis = parsed.analysis;
  out.problem = parsed.ok ? "" : parsed.problem;
  return out;
}

}  // namespace cudal1::serve
