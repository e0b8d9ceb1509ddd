// Reading an LLM reply written to the contrastive protocol: the performance analysis, the
// algorithm design, and the final complete ModelNew file.
#pragma once

#include <string>
#include <string_view>

namespace cudal1::search {

struct ParsedReply {
  bool ok = false;  // a complete code block defining ModelNew was found
  std::string
      problem;  // why not, when !ok ("no code block", "the last code block is cut off", ...)
  std::string analysis;  // "## Performance Analysis" section (or the prose before the code)
  std::string design;    // "## Algorithm Design" section
  std::string code;      // the chosen code block's content
};

// Picks the last complete fenced code block (``` or ~~~, any or no language tag) that defines
// `class ModelNew`, preferring blocks inside a "Code Implementation" section. A reply whose last
// fence is never closed (a truncated reply) and has no earlier complete candidate, a reply with
// prose only, or code without ModelNew, is not ok.
ParsedReply parse_reply(std::string_view reply);

}  // namespace cudal1::search
