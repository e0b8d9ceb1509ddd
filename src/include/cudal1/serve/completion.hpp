// What a trainer sends, turned into the code to evaluate. OpenRLHF's remote reward protocol sends
// the prompt and the prompt followed by the completion (the "query"); the code is the last
// complete ModelNew block of the completion, never a block of the prompt (which shows earlier
// implementations).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cudal1::serve {

// The completion part of an OpenRLHF query: what follows `prompt` when the query starts with
// it; else what follows the first occurrence of the prompt's ending (its last 200 characters
// without surrounding white space), which survives a tokenizer round trip that changed the
// prompt's beginning (special tokens, spaces); nullopt when neither is found. An empty prompt
// makes the whole query the completion.
std::optional<std::string> completion_of_query(std::string_view query, std::string_view prompt);

struct ExtractedCode {
  bool ok = false;
  std::string code;
  std::string analysis;  // the model's performance analysis, kept with the candidate
  std::string problem;   // why there is no code, when !ok
};

// The code of a model's reply written to the contrastive protocol (search::parse_reply).
ExtractedCode code_of_completion(std::string_view completion);

}  // namespace cudal1::serve
