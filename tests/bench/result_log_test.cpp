#include "cudal1/bench/result_log.hpp"

#include <gtest/gtest.h>

#include "cudal1/common/text_file.hpp"
#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using nlohmann::json;
using testing::input_error;
using testing::Scratch;

json line(int level, int id, const std::string& status) {
  return {{"level", level},
          {"task_id", id},
          {"task_name", std::to_string(id) + "_T"},
          {"status", status}};
}

TEST(ResultLogTest, AppendedLinesSurviveReopening) {
  Scratch dir;
  const auto file = dir.path("out/results.jsonl");
  {
    ResultLog log(file);
    EXPECT_TRUE(log.lines().empty());
    log.append(line(1, 2, "ok"));
    log.append(line(1, 1, "incorrect"));
    log.append(line(1, 2, "missing"));  // a later line for the same task wins
  }
  EXPECT_EQ(read_file(file).size() > 0, true);
  ResultLog log(file);
  ASSERT_EQ(log.lines().size(), 2u);
  ASSERT_NE(log.find({1, 2}), nullptr);
  EXPECT_EQ((*log.find({1, 2}))["status"], "missing");
  EXPECT_EQ(log.dropped_bytes(), 0u);
}

TEST(ResultLogTest, AnUnfinishedLastLineIsCutOff) {
  Scratch dir;
  const std::string partial = "{\"level\": 1, \"task";
  const auto file = dir.write("results.jsonl", line(1, 1, "ok").dump() + "\n" + partial);
  {
    ResultLog log(file);
    EXPECT_EQ(log.lines().size(), 1u);
    EXPECT_EQ(log.dropped_bytes(), partial.size());
    log.append(line(2, 1, "ok"));
  }
  // The new line starts on a line of its own: the file reads back whole.
  EXPECT_EQ(ResultLog::read(file).size(), 2u);
}

TEST(ResultLogTest, ABrokenLineInsideTheFileIsAnError) {
  Scratch dir;
  const auto file = dir.write(
      "results.jsonl", line(1, 1, "ok").dump() + "\nnot json\n" + line(1, 2, "ok").dump() + "\n");
  const std::string message = input_error([&] { ResultLog log(file); });
  EXPECT_CONTAINS(message, file.string() + "' line 2");
  dir.write("other.jsonl", "{\"level\": 1}\n");
  EXPECT_CONTAINS(input_error([&] { ResultLog log(dir.path("other.jsonl")); }), "line 1");
}

TEST(ResultLogTest, CompactionKeepsOneLinePerTaskInOrder) {
  Scratch dir;
  const auto file = dir.path("results.jsonl");
  ResultLog log(file);
  log.append(line(2, 1, "ok"));
  log.append(line(1, 5, "incorrect"));
  log.append(line(2, 1, "rejected"));
  log.compact();
  log.append(line(1, 1, "ok"));  // appending still works after the file was replaced
  const std::string text = read_file(file);
  const std::string expected = line(1, 5, "incorrect").dump() + "\n" +
                               line(2, 1, "rejected").dump() + "\n" + line(1, 1, "ok").dump() +
                               "\n";
  EXPECT_EQ(text, expected);
}

TEST(ResultLogTest, AFileAKilledRunLeftTwoLinesOfATaskInIsCompactedOnOpening) {
  Scratch dir;
  // A task re-evaluated (its solution changed), then kill -9 before the run compacted.
  const auto file =
      dir.write("results.jsonl", line(1, 2, "ok").dump() + "\n" + line(1, 1, "incorrect").dump() +
                                     "\n" + line(1, 2, "rejected").dump() + "\n");
  {
    ResultLog log(file);
    EXPECT_EQ(log.lines().size(), 2u);
  }
  // Killed again right after opening: the file already says one thing per task.
  EXPECT_EQ(read_file(file),
            line(1, 1, "incorrect").dump() + "\n" + line(1, 2, "rejected").dump() + "\n");
  // A file with one line per task is left as it is (no rewrite on every open).
  const auto other =
      dir.write("other.jsonl", line(1, 2, "ok").dump() + "\n" + line(1, 1, "ok").dump() + "\n");
  { ResultLog log(other); }
  EXPECT_EQ(read_file(other), line(1, 2, "ok").dump() + "\n" + line(1, 1, "ok").dump() + "\n");
}

}  // namespace
}  // namespace cudal1::bench
