// A line diff (Myers' O(ND) algorithm) of a candidate against its reference, grouped into
// unified-diff hunks for display.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace cudal1::report {

enum class DiffOp { kSame, kRemoved, kAdded };

struct DiffLine {
  DiffOp op = DiffOp::kSame;
  std::string text;
  std::size_t old_line = 0;  // 1-based line in the old text; 0 for an added line
  std::size_t new_line = 0;  // 1-based line in the new text; 0 for a removed line
};

struct DiffHunk {
  std::size_t old_start = 0,
              old_count = 0;  // as in "@@ -old_start,old_count +new_start,new_count @@"
  std::size_t new_start = 0, new_count = 0;
  std::vector<DiffLine> lines;
};

// Lines without their terminators ("\n" or "\r\n"); a final newline does not start a line.
std::vector<std::string> split_lines(std::string_view text);

// A shortest edit script from `before` to `after`, as every line of both in order. When more than
// `max_edits` lines differ the search stops and the result removes every differing line of
// `before` and adds every differing line of `after` (still a correct, if longer, diff): it bounds
// time and memory on unrelated files.
std::vector<DiffLine> diff_lines(const std::vector<std::string>& before,
                                 const std::vector<std::string>& after,
                                 std::size_t max_edits = 2000);

// Changes with `context` unchanged lines around them; changes closer than 2 * context lines share
// a hunk. No hunks when nothing changed.
std::vector<DiffHunk> group_hunks(const std::vector<DiffLine>& diff, std::size_t context = 3);

}  // namespace cudal1::report
