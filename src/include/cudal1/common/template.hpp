// A small logic-less template language for prompt files (a subset of Mustache):
//   {{name}}              the value of `name` (strings as is, numbers and booleans as JSON)
//   {{#name}}...{{/name}} repeated for each element when `name` is an array (names inside are
//                         looked up in the element first, then outside), rendered once when it
//                         is a true, non-empty value, skipped otherwise
//   {{^name}}...{{/name}} rendered when `name` is missing, false, null, empty or an empty array
//   {{! comment }}        dropped
// No HTML escaping: prompts are plain text. Unknown names render as nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace cudal1 {

class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws TemplateError (with the line) for an unclosed or mismatched section.
std::string render_template(std::string_view text, const nlohmann::json& context);

}  // namespace cudal1
