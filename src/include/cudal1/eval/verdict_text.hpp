// A verdict for people on a terminal (cudal1 eval without --json): a few aligned lines with the
// status and speedup with its interval, both times, correctness, each flag with its one-line
// meaning from the flag table, the finding or error that decided a failure, and the review.
// Programs read the JSON (Verdict::to_json); this text is not a format to parse.
#pragma once

#include <string>

#include "cudal1/eval/verdict.hpp"

namespace cudal1 {

// Lines ending in '\n'. `width` wraps nothing: long findings are cut at `width` characters.
std::string verdict_text(const Verdict& verdict, std::size_t width = 160);

}  // namespace cudal1
