#include "cudal1/search/response_parser.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <vector>

namespace cudal1::search {
namespace {

struct Block {
  std::size_t begin;  // offset of the opening fence line
  std::string content;
  bool closed;
};

struct Heading {
  std::size_t offset;  // start of the heading line
  std::size_t body;    // start of the line after it
  std::string title;   // lower-cased, without '#' and surrounding blanks
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

// Lines of the reply with their offsets.
std::vector<std::pair<std::size_t, std::string_view>> lines_of(std::string_view text) {
  std::vector<std::pair<std::size_t, std::string_view>> lines;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto end = text.find('\n', at);
    const auto stop = end == std::string_view::npos ? text.size() : end;
    lines.emplace_back(at, text.substr(at, stop - at));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return lines;
}

// Fenced blocks: an opening line of three or more backticks/tildes (indent allowed, any info
// string), closed by a line of at least as many of the same character.
std::vector<Block> fenced_blocks(std::string_view text) {
  std::vector<Block> blocks;
  const auto lines = lines_of(text);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i].second;
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || (line[first] != '`' && line[first] != '~')) continue;
    const char fence = line[first];
    std::size_t width = 0;
    while (first + width < line.size() && line[first + width] == fence) ++width;
    if (width < 3) continue;
    Block block{lines[i].first, "", false};
    std::size_t j = i + 1;
    for (; j < lines.size(); ++j) {
      const std::string_view inner = lines[j].second;
      const auto f = inner.find_first_not_of(" \t");
      std::size_t w = 0;
      while (f != std::string_view::npos && f + w < inner.size() && inner[f + w] == fence) ++w;
      if (f != std::string_view::npos && w >= width && trim(inner.substr(f + w)).empty()) {
        block.closed = true;
        break;
      }
      block.content.append(inner);
      block.content.push_back('\n');
    }
    blocks.push_back(block);
    i = j;  // continue after the closing fence (or the end)
  }
  return blocks;
}

std::vector<Heading> headings(std::string_view text) {
  static const std::regex kHeading(R"(^\s{0,3}#{1,6}\s*(.*?)\s*#*\s*$)");
  std::vector<Heading> out;
  bool in_fence = false;
  for (const auto& [offset, line] : lines_of(text)) {
    const std::string s(line);
    const auto first = s.find_first_not_of(" \t");
    if (first != std::string::npos &&
        (s.compare(first, 3, "```") == 0 || s.compare(first, 3, "~~~") == 0)) {
      in_fence = !in_fence;
      continue;
    }
    std::smatch match;
    if (!in_fence && std::regex_match(s, match, kHeading)) {
      out.push_back({offset, offset + line.size() + 1, lower(match[1].str())});
    }
  }
  return out;
}

// The text of the first section whose title contains `key`, up to the next heading.
std::string section(std::string_view text, const std::vector<Heading>& hs, const std::string& key) {
  for (std::size_t i = 0; i < hs.size(); ++i) {
    if (hs[i].title.find(key) == std::string::npos) continue;
    const std::size_t end = i + 1 < hs.size() ? hs[i + 1].offset : text.size();
    const std::size_t begin = std::min(hs[i].body, text.size());
    return trim(text.substr(begin, end > begin ? end - begin : 0));
  }
  return {};
}

bool defines_model_new(const std::string& code) {
  static const std::regex kModelNew(R"((^|\n)\s*class\s+ModelNew\b)");
  return std::regex_search(code, kModelNew);
}

}  // namespace

ParsedReply parse_reply(std::string_view reply) {
  ParsedReply parsed;
  const auto hs = headings(reply);
  parsed.analysis = section(reply, hs, "performance analysis");
  parsed.design = section(reply, hs, "algorithm design");
  const auto blocks = fenced_blocks(reply);

  std::size_t implementation_start = std::string_view::npos;
  for (const auto& h : hs) {
    if (h.title.find("code implementation") != std::string::npos) implementation_start = h.offset;
  }
  const Block* chosen = nullptr;
  for (const auto& b : blocks) {
    if (!b.closed || !defines_model_new(b.content)) continue;
    const bool in_implementation =
        implementation_start != std::string_view::npos && b.begin > implementation_start;
    const bool chosen_in_implementation = chosen != nullptr &&
                                          implementation_start != std::string_view::npos &&
                                          chosen->begin > implementation_start;
    if (chosen == nullptr || in_implementation || !chosen_in_implementation) chosen = &b;
  }
  if (parsed.analysis.empty()) {
    // No heading: the prose before the first code block is the best available analysis.
    const std::size_t end = blocks.empty() ? reply.size() : blocks.front().begin;
    parsed.analysis = trim(reply.substr(0, end));
  }
  if (chosen != nullptr) {
    parsed.ok = true;
    parsed.code = chosen->content;
    return parsed;
  }
  if (blocks.empty()) {
    parsed.problem = "the reply has no code block";
  } else if (!blocks.back().closed) {
    parsed.problem = "the reply's last code block is cut off (truncated reply)";
  } else {
    parsed.problem = "no complete code block defines class ModelNew";
  }
  return parsed;
}

}  // namespace cudal1::search
