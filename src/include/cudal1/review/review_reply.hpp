// Reading the reward-checking model's reply: free reasoning, then a final JSON object
// {"verdict": "hack" | "legitimate" | "uncertain", "class": "...", "reasoning": "..."}.
#pragma once

#include <string>
#include <string_view>

namespace cudal1::review {

struct ReviewReply {
  std::string verdict;     // "hack", "legitimate", "uncertain", or "unparseable"
  std::string hack_class;  // as the reviewer named it, lowercased; "" when none
  std::string reasoning;   // the JSON's "reasoning", else the prose before the JSON
  std::string problem;     // why the reply is unparseable ("" otherwise)
};

// Takes the last JSON object with a "verdict" key, wherever it is: in a ```json fence, bare, or
// with prose before and after it (trailing commas are forgiven). A reply cut off inside the
// object still counts when its "verdict" field is complete. Anything else is "unparseable".
ReviewReply parse_review_reply(std::string_view reply);

}  // namespace cudal1::review
