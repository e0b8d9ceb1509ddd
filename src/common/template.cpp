#include "cudal1/common/template.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace cudal1 {
namespace {

struct Tag {
  char kind;  // 0 (value), '#', '^', '/', '!'
  std::string name;
  std::size_t begin;  // offset of "{{"
  std::size_t end;    // offset just past "}}"
};

std::size_t line_of(std::string_view text, std::size_t offset) {
  return 1 + static_cast<std::size_t>(std::count(
                 text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return std::string(s.substr(first, last - first + 1));
}

// The next tag at or after `from`, or nullopt.
std::optional<Tag> next_tag(std::string_view text, std::size_t from) {
  const auto open = text.find("{{", from);
  if (open == std::string_view::npos) return std::nullopt;
  const auto close = text.find("}}", open + 2);
  if (close == std::string_view::npos) {
    throw TemplateError(fmt::format("line {}: '{{{{' without '}}}}'", line_of(text, open)));
  }
  std::string_view inside = text.substr(open + 2, close - open - 2);
  Tag tag{0, "", open, close + 2};
  if (!inside.empty() &&
      (inside[0] == '#' || inside[0] == '^' || inside[0] == '/' || inside[0] == '!')) {
    tag.kind = inside[0];
    inside.remove_prefix(1);
  }
  tag.name = trim(inside);
  return tag;
}

const nlohmann::json* lookup(const std::vector<const nlohmann::json*>& scopes,
                             const std::string& name) {
  for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
    if ((*it)->is_object() && (*it)->contains(name)) return &(**it)[name];
  }
  return nullptr;
}

bool truthy(const nlohmann::json* value) {
  if (value == nullptr || value->is_null()) return false;
  if (value->is_boolean()) return value->get<bool>();
  if (value->is_array() || value->is_object() || value->is_string()) return !value->empty();
  return true;
}

// Offset of the tag closing the section opened by `open`, honouring nested sections.
Tag find_close(std::string_view text, const Tag& open) {
  int depth = 0;
  std::size_t at = open.end;
  while (auto tag = next_tag(text, at)) {
    if ((tag->kind == '#' || tag->kind == '^') && tag->name == open.name) ++depth;
    if (tag->kind == '/' && tag->name == open.name) {
      if (depth == 0) return *tag;
      --depth;
    }
    at = tag->end;
  }
  throw TemplateError(
      fmt::format("line {}: section '{}' is never closed", line_of(text, open.begin), open.name));
}

// Whether only spaces stand between the line's start and `at`.
bool starts_line(std::string_view text, std::size_t at) {
  while (at > 0 && (text[at - 1] == ' ' || text[at - 1] == '\t')) --at;
  return at == 0 || text[at - 1] == '\n';
}

// A section tag alone on its line takes the line with it, so templates can be laid out freely;
// one inside a line ("`{{name}}`{{#own}} (own){{/own}}") leaves the line's end as it is.
std::size_t skip_line_after(std::string_view text, const Tag& tag) {
  std::size_t at = tag.end;
  if (!starts_line(text, tag.begin)) return at;
  std::size_t i = at;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i < text.size() && text[i] == '\n') return i + 1;
  return at;
}

void render(std::string_view text, std::vector<const nlohmann::json*>& scopes, std::string& out) {
  std::size_t at = 0;
  while (auto tag = next_tag(text, at)) {
    out.append(text.substr(at, tag->begin - at));
    switch (tag->kind) {
      case '!':
        at = skip_line_after(text, *tag);
        break;
      case 0: {
        const nlohmann::json* value = lookup(scopes, tag->name);
        if (value != nullptr && !value->is_null())
          out += value->is_string() ? value->get<std::string>() : value->dump();
        at = tag->end;
        break;
      }
      case '/':
        throw TemplateError(fmt::format("line {}: '{{{{/{}}}}}' closes nothing",
                                        line_of(text, tag->begin), tag->name));
      default: {
        const Tag close = find_close(text, *tag);
        const std::size_t body_begin = skip_line_after(text, *tag);
        const std::string_view body = text.substr(body_begin, close.begin - body_begin);
        const nlohmann::json* value = lookup(scopes, tag->name);
        if (tag->kind == '^') {
          if (!truthy(value)) render(body, scopes, out);
        } else if (value != nullptr && value->is_array()) {
          for (const auto& element : *value) {
            scopes.push_back(&element);
            render(body, scopes, out);
            scopes.pop_back();
          }
        } else if (truthy(value)) {
          scopes.push_back(value);
          render(body, scopes, out);
          scopes.pop_back();
        }
        at = skip_line_after(text, close);
      }
    }
  }
  out.append(text.substr(at));
}

}  // namespace

std::string render_template(std::string_view text, const nlohmann::json& context) {
  std::vector<const nlohmann::json*> scopes = {&context};
  std::string out;
  render(text, scopes, out);
  return out;
}

}  // namespace cudal1
