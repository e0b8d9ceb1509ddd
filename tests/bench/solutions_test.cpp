#include "cudal1/bench/solutions.hpp"

#include <gtest/gtest.h>

#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using testing::input_error;
using testing::Scratch;

TEST(SolutionsTest, ReadsJsonLines) {
  const std::string text =
      "{\"level_id\": 1, \"task_id\": 3, \"custom_code\": \"class ModelNew: pass\\n\", "
      "\"score\": 2.5, \"name\": \"kept but ignored\"}\n"
      "\n"
      "{\"level_id\": \"2\", \"task_id\": \"10\", \"custom_code\": null}\r\n"
      "{\"level_id\": 3, \"task_id\": 1, \"custom_code\": \"  \\n\"}";
  const SolutionSet set = SolutionSet::parse_jsonl(text, "s.jsonl");
  ASSERT_EQ(set.solutions.size(), 3u);
  const Solution* first = set.find({1, 3});
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->code.value_or("?"), "class ModelNew: pass\n");
  EXPECT_EQ(first->origin, "s.jsonl:1");
  ASSERT_NE(set.find({2, 10}), nullptr);
  EXPECT_FALSE(set.find({2, 10})->code);  // null counts as missing
  EXPECT_EQ(set.find({2, 10})->origin, "s.jsonl:3");
  ASSERT_NE(set.find({3, 1}), nullptr);
  EXPECT_FALSE(set.find({3, 1})->code);  // so does whitespace
  EXPECT_EQ(set.find({1, 4}), nullptr);
}

struct BadLine {
  const char* text;
  const char* expected;
};

TEST(SolutionsTest, RejectsMalformedLinesWithTheirNumber) {
  const std::string good = "{\"level_id\": 1, \"task_id\": 1, \"custom_code\": \"x\"}\n";
  const BadLine cases[] = {
      {"{\"level_id\": 1, \"task_id\": 2, \"custom_code\": \"x\"", "s.jsonl:2: not valid JSON"},
      {"[1, 2, \"x\"]", "s.jsonl:2: expected a JSON object"},
      {"{\"task_id\": 2, \"custom_code\": \"x\"}", "s.jsonl:2: no \"level_id\""},
      {"{\"level_id\": 1, \"custom_code\": \"x\"}", "s.jsonl:2: no \"task_id\""},
      {"{\"level_id\": 1, \"task_id\": 2}", "s.jsonl:2: no \"custom_code\""},
      {"{\"level_id\": 1, \"task_id\": 2, \"custom_code\": 5}",
       "s.jsonl:2: \"custom_code\" must be a string or null"},
      {"{\"level_id\": -1, \"task_id\": 2, \"custom_code\": \"x\"}",
       "s.jsonl:2: \"level_id\" must be a non-negative integer"},
      {"{\"level_id\": 1.5, \"task_id\": 2, \"custom_code\": \"x\"}",
       "s.jsonl:2: \"level_id\" must be a non-negative integer"},
      {"{\"level_id\": 1, \"task_id\": \"two\", \"custom_code\": \"x\"}",
       "s.jsonl:2: \"task_id\" must be a non-negative integer"},
      {"{\"level_id\": 1, \"task_id\": 1, \"custom_code\": \"y\"}",
       "s.jsonl:2: a second solution for level 1 task 1 (the first is on line 1)"},
  };
  for (const BadLine& bad : cases) {
    EXPECT_CONTAINS(
        input_error([&] { SolutionSet::parse_jsonl(good + bad.text + "\n", "s.jsonl"); }),
        bad.expected);
  }
}

TEST(SolutionsTest, EmptyFileIsAnError) {
  EXPECT_CONTAINS(input_error([] { SolutionSet::parse_jsonl("\n\n", "s.jsonl"); }),
                  "'s.jsonl' holds no solution");
}

TEST(SolutionsTest, LoadsAFileByPath) {
  Scratch dir;
  const auto file = dir.write("solutions.jsonl",
                              "{\"level_id\": 1, \"task_id\": 1, \"custom_code\": \"code\"}\n");
  const SolutionSet set = SolutionSet::load(file);
  EXPECT_EQ(set.source, file);
  ASSERT_NE(set.find({1, 1}), nullptr);
  EXPECT_EQ(set.find({1, 1})->origin, file.string() + ":1");
  EXPECT_CONTAINS(input_error([&] { SolutionSet::load(dir.path("absent.jsonl")); }),
                  "absent.jsonl' do not exist");
  dir.write("broken.jsonl", "{\"level_id\": 1}\n{oops\n");
  EXPECT_CONTAINS(input_error([&] { SolutionSet::load(dir.path("broken.jsonl")); }),
                  dir.path("broken.jsonl").string() + ":1: no \"task_id\"");
}

TEST(SolutionsTest, ReadsADirectoryInTheSuiteLayout) {
  Scratch dir;
  dir.write("sol/level1/1_Gelu.py", "class ModelNew: pass\n");
  dir.write("sol/level1/2_Empty.py", "\n");
  dir.write("sol/level3/4_Gru.py", "class ModelNew: pass  # gru\n");
  const SolutionSet set = SolutionSet::load(dir.path("sol"));
  ASSERT_EQ(set.solutions.size(), 3u);
  EXPECT_EQ(set.find({1, 1})->code.value_or(""), "class ModelNew: pass\n");
  EXPECT_EQ(set.find({1, 1})->origin, dir.path("sol/level1/1_Gelu.py").string());
  EXPECT_FALSE(set.find({1, 2})->code);
  EXPECT_TRUE(set.find({3, 4})->code);

  dir.write("bad/level1/gelu.py", "");
  EXPECT_CONTAINS(input_error([&] { SolutionSet::load(dir.path("bad")); }), "<task_id>_<Name>.py");
  dir.write("dup/level1/1_A.py", "a");
  dir.write("dup/level1/1_B.py", "b");
  EXPECT_CONTAINS(input_error([&] { SolutionSet::load(dir.path("dup")); }), "task id 1 in level 1");
  dir.mkdir("nolevels/x");
  EXPECT_CONTAINS(input_error([&] { SolutionSet::load(dir.path("nolevels")); }),
                  "solutions directory");
}

TEST(SolutionsTest, FindsSolutionsForTasksOutsideTheSuite) {
  Scratch dir;
  dir.write("suite/level1/1_A.py", "");
  dir.write("suite/level2/1_B.py", "");
  const Suite suite = Suite::load(dir.path("suite"));
  const SolutionSet set = SolutionSet::parse_jsonl(
      "{\"level_id\": 1, \"task_id\": 1, \"custom_code\": \"x\"}\n"
      "{\"level_id\": 1, \"task_id\": 9, \"custom_code\": \"x\"}\n"
      "{\"level_id\": 4, \"task_id\": 1, \"custom_code\": null}\n",
      "s.jsonl");
  const auto unmatched = unmatched_solutions(set, suite);
  ASSERT_EQ(unmatched.size(), 2u);
  EXPECT_EQ(unmatched[0]->task, (TaskRef{1, 9}));
  EXPECT_EQ(unmatched[1]->task, (TaskRef{4, 1}));
  EXPECT_EQ(unmatched[0]->origin, "s.jsonl:2");
}

}  // namespace
}  // namespace cudal1::bench
