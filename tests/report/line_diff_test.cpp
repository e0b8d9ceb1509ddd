#include "cudal1/report/line_diff.hpp"

#include <gtest/gtest.h>

#include <random>

namespace cudal1::report {
namespace {

// Applying the diff to `before` must give `after`, and every line of both appears in order.
void expect_valid(const std::vector<std::string>& before, const std::vector<std::string>& after,
                  const std::vector<DiffLine>& diff) {
  std::vector<std::string> old_side, new_side;
  for (const auto& line : diff) {
    if (line.op != DiffOp::kAdded) {
      old_side.push_back(line.text);
      EXPECT_EQ(line.old_line, old_side.size());
    }
    if (line.op != DiffOp::kRemoved) {
      new_side.push_back(line.text);
      EXPECT_EQ(line.new_line, new_side.size());
    }
  }
  EXPECT_EQ(old_side, before);
  EXPECT_EQ(new_side, after);
}

std::size_t edits(const std::vector<DiffLine>& diff) {
  std::size_t n = 0;
  for (const auto& line : diff) n += line.op != DiffOp::kSame;
  return n;
}

TEST(SplitLines, HandlesNewlinesAndCarriageReturns) {
  EXPECT_EQ(split_lines(""), std::vector<std::string>{});
  EXPECT_EQ(split_lines("a\nb\n"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split_lines("a\r\nb"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(split_lines("a\n\nb"), (std::vector<std::string>{"a", "", "b"}));
}

TEST(DiffLines, IdenticalTextsHaveNoEdits) {
  const std::vector<std::string> text{"a", "b", "c"};
  const auto diff = diff_lines(text, text);
  expect_valid(text, text, diff);
  EXPECT_EQ(edits(diff), 0u);
  EXPECT_TRUE(group_hunks(diff).empty());
}

TEST(DiffLines, FindsAShortestEditScript) {
  // The classic example of Myers' paper: ABCABBA -> CBABAC needs 5 edits.
  const std::vector<std::string> a{"A", "B", "C", "A", "B", "B", "A"};
  const std::vector<std::string> b{"C", "B", "A", "B", "A", "C"};
  const auto diff = diff_lines(a, b);
  expect_valid(a, b, diff);
  EXPECT_EQ(edits(diff), 5u);
}

TEST(DiffLines, EmptySides) {
  const std::vector<std::string> text{"x", "y"};
  auto diff = diff_lines({}, text);
  expect_valid({}, text, diff);
  EXPECT_EQ(edits(diff), 2u);
  diff = diff_lines(text, {});
  expect_valid(text, {}, diff);
  EXPECT_EQ(diff[0].op, DiffOp::kRemoved);
}

TEST(DiffLines, ReplacedLineInTheMiddle) {
  const std::vector<std::string> a{"import torch", "class Model:", "    y = x * s", "    return y"};
  const std::vector<std::string> b{"import torch", "class Model:", "    y = fused(x, s)",
                                   "    return y"};
  const auto diff = diff_lines(a, b);
  expect_valid(a, b, diff);
  ASSERT_EQ(diff.size(), 5u);
  EXPECT_EQ(diff[2].op, DiffOp::kRemoved);
  EXPECT_EQ(diff[2].text, "    y = x * s");
  EXPECT_EQ(diff[3].op, DiffOp::kAdded);
  EXPECT_EQ(diff[3].text, "    y = fused(x, s)");
}

TEST(DiffLines, RandomEditsAreValidAndNoLongerThanTheEdits) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::string> a;
    const int n = static_cast<int>(random() % 40);
    for (int i = 0; i < n; ++i) a.push_back(std::string(1, static_cast<char>('a' + random() % 4)));
    std::vector<std::string> b = a;
    std::size_t applied = 0;
    for (int k = static_cast<int>(random() % 6); k > 0; --k, ++applied) {
      if (!b.empty() && random() % 2) {
        b.erase(b.begin() + static_cast<long>(random() % b.size()));
      } else {
        b.insert(b.begin() + static_cast<long>(b.empty() ? 0 : random() % (b.size() + 1)), "new");
      }
    }
    const auto diff = diff_lines(a, b);
    expect_valid(a, b, diff);
    EXPECT_LE(edits(diff), applied) << "trial " << trial;
  }
}

TEST(DiffLines, TooManyEditsFallsBackToReplacingTheMiddle) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 50; ++i) {
    a.push_back("old " + std::to_string(i));
    b.push_back("new " + std::to_string(i));
  }
  a.insert(a.begin(), "same start");
  b.insert(b.begin(), "same start");
  const auto diff = diff_lines(a, b, /*max_edits=*/10);
  expect_valid(a, b, diff);
  EXPECT_EQ(edits(diff), 100u);
  EXPECT_EQ(diff.front().op, DiffOp::kSame);
}

TEST(GroupHunks, ContextAndMerging) {
  std::vector<std::string> a;
  for (int i = 1; i <= 30; ++i) a.push_back("line " + std::to_string(i));
  std::vector<std::string> b = a;
  b[4] = "changed 5";    // line 5
  b[10] = "changed 11";  // 6 lines later: contexts of 3 touch, one hunk
  b[25] = "changed 26";  // far away: a second hunk
  const auto hunks = group_hunks(diff_lines(a, b), 3);
  ASSERT_EQ(hunks.size(), 2u);
  EXPECT_EQ(hunks[0].old_start, 2u);
  EXPECT_EQ(hunks[0].old_count, 13u);  // lines 2..14
  EXPECT_EQ(hunks[0].new_start, 2u);
  EXPECT_EQ(hunks[0].new_count, 13u);
  EXPECT_EQ(hunks[0].lines.front().text, "line 2");
  EXPECT_EQ(hunks[0].lines.back().text, "line 14");
  EXPECT_EQ(hunks[1].old_start, 23u);
  EXPECT_EQ(hunks[1].old_count, 7u);  // lines 23..29
}

TEST(GroupHunks, AdditionAtTheStartOfAnEmptyFile) {
  const auto hunks = group_hunks(diff_lines({}, {"a", "b"}));
  ASSERT_EQ(hunks.size(), 1u);
  EXPECT_EQ(hunks[0].old_start, 0u);
  EXPECT_EQ(hunks[0].old_count, 0u);
  EXPECT_EQ(hunks[0].new_start, 1u);
  EXPECT_EQ(hunks[0].new_count, 2u);
}

}  // namespace
}  // namespace cudal1::report
