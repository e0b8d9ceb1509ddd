#include "cudal1/report/line_diff.hpp"

#include <algorithm>

namespace cudal1::report {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

namespace {

using Lines = std::vector<std::string>;

// The middle part of a diff, between the common prefix and suffix: a[a_begin, a_end) against
// b[b_begin, b_end).
struct Span {
  const Lines& a;
  const Lines& b;
  std::size_t a_begin, a_end, b_begin, b_end;
};

// Myers' greedy search for the furthest-reaching D-paths. trace[d] keeps the frontier (x per
// diagonal k in [-d-1, d+1]) as it was before step d, which is all backtracking needs: O(D^2)
// memory instead of O(D * (N + M)).
bool shortest_edit(const Span& s, std::size_t max_edits, std::vector<DiffLine>& out) {
  const long n = static_cast<long>(s.a_end - s.a_begin);
  const long m = static_cast<long>(s.b_end - s.b_begin);
  const long max_d = std::min<long>(n + m, static_cast<long>(max_edits));
  const long offset = max_d + 1;
  std::vector<long> v(static_cast<std::size_t>(2 * offset + 1), 0);
  auto at = [&](std::vector<long>& frontier, long k) -> long& {
    return frontier[static_cast<std::size_t>(k + offset)];
  };
  auto same = [&](long x, long y) {
    return s.a[s.a_begin + static_cast<std::size_t>(x)] ==
           s.b[s.b_begin + static_cast<std::size_t>(y)];
  };
  std::vector<std::vector<long>> trace;
  long found = -1;
  for (long d = 0; d <= max_d && found < 0; ++d) {
    trace.emplace_back(v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
    for (long k = -d; k <= d; k += 2) {
      long x =
          (k == -d || (k != d && at(v, k - 1) < at(v, k + 1))) ? at(v, k + 1) : at(v, k - 1) + 1;
      long y = x - k;
      while (x < n && y < m && same(x, y)) ++x, ++y;
      at(v, k) = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) return false;

  std::vector<DiffLine> reversed;
  long x = n, y = m;
  for (long d = found; d >= 0; --d) {
    const std::vector<long>& frontier = trace[static_cast<std::size_t>(d)];
    auto before = [&](long k) { return frontier[static_cast<std::size_t>(k + d + 1)]; };
    const long k = x - y;
    const long prev_k = (k == -d || (k != d && before(k - 1) < before(k + 1))) ? k + 1 : k - 1;
    const long prev_x = d == 0 ? 0 : before(prev_k);
    const long prev_y = d == 0 ? 0 : prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x, --y;
      reversed.push_back({DiffOp::kSame, s.a[s.a_begin + static_cast<std::size_t>(x)],
                          s.a_begin + static_cast<std::size_t>(x) + 1,
                          s.b_begin + static_cast<std::size_t>(y) + 1});
    }
    if (d == 0) break;
    if (x == prev_x) {
      --y;
      reversed.push_back({DiffOp::kAdded, s.b[s.b_begin + static_cast<std::size_t>(y)], 0,
                          s.b_begin + static_cast<std::size_t>(y) + 1});
    } else {
      --x;
      reversed.push_back({DiffOp::kRemoved, s.a[s.a_begin + static_cast<std::size_t>(x)],
                          s.a_begin + static_cast<std::size_t>(x) + 1, 0});
    }
    x = prev_x, y = prev_y;
  }
  out.insert(out.end(), reversed.rbegin(), reversed.rend());
  return true;
}

}  // namespace

std::vector<DiffLine> diff_lines(const Lines& before, const Lines& after, std::size_t max_edits) {
  std::vector<DiffLine> out;
  // The common prefix and suffix cost nothing to find and shrink the search to what changed.
  std::size_t prefix = 0;
  while (prefix < before.size() && prefix < after.size() && before[prefix] == after[prefix])
    ++prefix;
  std::size_t suffix = 0;
  while (suffix < before.size() - prefix && suffix < after.size() - prefix &&
         before[before.size() - 1 - suffix] == after[after.size() - 1 - suffix])
    ++suffix;
  for (std::size_t i = 0; i < prefix; ++i) out.push_back({DiffOp::kSame, before[i], i + 1, i + 1});

  const Span middle{before, after, prefix, before.size() - suffix, prefix, after.size() - suffix};
  if (!shortest_edit(middle, max_edits, out)) {
    for (std::size_t i = middle.a_begin; i < middle.a_end; ++i)
      out.push_back({DiffOp::kRemoved, before[i], i + 1, 0});
    for (std::size_t i = middle.b_begin; i < middle.b_end; ++i)
      out.push_back({DiffOp::kAdded, after[i], 0, i + 1});
  }
  for (std::size_t i = 0; i < suffix; ++i) {
    const std::size_t a = before.size() - suffix + i, b = after.size() - suffix + i;
    out.push_back({DiffOp::kSame, before[a], a + 1, b + 1});
  }
  return out;
}

std::vector<DiffHunk> group_hunks(const std::vector<DiffLine>& diff, std::size_t context) {
  std::vector<DiffHunk> hunks;
  const std::size_t n = diff.size();
  std::size_t i = 0;
  while (i < n) {
    while (i < n && diff[i].op == DiffOp::kSame) ++i;
    if (i == n) break;
    // [begin, end) covers the changes of this hunk and their context.
    std::size_t begin = i > context ? i - context : 0;
    std::size_t last_change = i;
    std::size_t j = i;
    while (j < n) {
      if (diff[j].op != DiffOp::kSame) {
        last_change = j;
        ++j;
        continue;
      }
      std::size_t run = j;
      while (run < n && diff[run].op == DiffOp::kSame) ++run;
      if (run == n || run - j > 2 * context) break;
      j = run;
    }
    const std::size_t end = std::min(n, last_change + 1 + context);
    DiffHunk hunk;
    hunk.lines.assign(diff.begin() + static_cast<long>(begin),
                      diff.begin() + static_cast<long>(end));
    // Start lines as in unified diffs: the line before an empty side.
    std::size_t old_before = 0, new_before = 0;
    for (std::size_t k = 0; k < begin; ++k) {
      if (diff[k].op != DiffOp::kAdded) ++old_before;
      if (diff[k].op != DiffOp::kRemoved) ++new_before;
    }
    for (const auto& line : hunk.lines) {
      if (line.op != DiffOp::kAdded) ++hunk.old_count;
      if (line.op != DiffOp::kRemoved) ++hunk.new_count;
    }
    hunk.old_start = hunk.old_count ? old_before + 1 : old_before;
    hunk.new_start = hunk.new_count ? new_before + 1 : new_before;
    hunks.push_back(std::move(hunk));
    i = end;
  }
  return hunks;
}

}  // namespace cudal1::report
