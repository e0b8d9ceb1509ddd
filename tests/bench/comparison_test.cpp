#include "cudal1/bench/comparison.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using nlohmann::json;
using testing::input_error;
using testing::Scratch;

json line(int level, int id, const std::string& status, std::optional<double> speedup,
          std::optional<double> candidate_ms) {
  json l = {{"level", level},
            {"task_id", id},
            {"task_name", std::to_string(id) + "_T"},
            {"status", status},
            {"speedup", speedup ? json(*speedup) : json()},
            {"candidate_ms", candidate_ms ? json(*candidate_ms) : json()},
            {"reference_ms", candidate_ms && speedup ? json(*candidate_ms * *speedup) : json()}};
  return l;
}

ResultSet result_set(const std::string& name, std::vector<json> lines, double geomean) {
  ResultSet set;
  set.summary_file = "/" + name + "/summary.json";
  set.summary = {{"device", {{"name", name}}},
                 {"torch", "2.5.1"},
                 {"overall", {{"tasks", 3}, {"geomean", geomean}, {"fast_1", 0.5}}},
                 {"levels", {{"1", {{"geomean", geomean}}}}}};
  for (auto& l : lines) set.lines[{l["level"].get<int>(), l["task_id"].get<int>()}] = l;
  return set;
}

TEST(ComparisonTest, PerTaskRatiosAndAggregates) {
  const ResultSet a = result_set("H100",
                                 {line(1, 1, "ok", 2.0, 0.5), line(1, 2, "ok", 4.0, 1.0),
                                  line(1, 3, "ok", 1.0, 1.0), line(2, 1, "ok", 1.0, 1.0)},
                                 2.0);
  const ResultSet b = result_set("H200",
                                 {line(1, 1, "ok", 4.0, 0.25), line(1, 2, "ok", 1.0, 0.5),
                                  line(1, 3, "incorrect", {}, {}), line(3, 1, "ok", 1.0, 1.0)},
                                 3.0);
  const json c = compare_result_sets(a, b);
  EXPECT_EQ(c["a"]["device"], "H100");
  EXPECT_EQ(c["b"]["device"], "H200");
  ASSERT_EQ(c["tasks"].size(), 3u);
  const json& first = c["tasks"][0];
  EXPECT_EQ(first["task"], "level1/1_T");
  EXPECT_DOUBLE_EQ(first["speedup_ratio"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(first["candidate_ms_ratio"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(first["reference_ms_ratio"].get<double>(), 1.0);
  EXPECT_TRUE(c["tasks"][2]["speedup_ratio"].is_null());
  EXPECT_EQ(c["only_in_a"], json({"level2/1_T"}));
  EXPECT_EQ(c["only_in_b"], json({"level3/1_T"}));
  const json& aggregate = c["aggregate"];
  EXPECT_EQ(aggregate["tasks_in_both"], 3);
  EXPECT_EQ(aggregate["ok_in_both"], 2);
  EXPECT_DOUBLE_EQ(aggregate["geomean_speedup_ratio"].get<double>(), std::sqrt(2.0 * 0.25));
  EXPECT_DOUBLE_EQ(aggregate["geomean_candidate_ms_ratio"].get<double>(), 0.5);
  EXPECT_EQ(aggregate["status_changed"].size(), 1u);
  EXPECT_EQ(aggregate["status_changed"][0]["b"], "incorrect");
  EXPECT_DOUBLE_EQ(aggregate["overall"]["geomean"]["ratio"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(aggregate["levels"]["1"]["geomean"]["b"].get<double>(), 3.0);

  const std::string table = format_comparison(c);
  EXPECT_CONTAINS(table, "level1/1_T");
  EXPECT_CONTAINS(table, "only in A: level2/1_T");
  EXPECT_CONTAINS(table, "only in B: level3/1_T");
  EXPECT_CONTAINS(table, "status changed: level1/3_T ok -> incorrect");
}

TEST(ComparisonTest, LoadsADirectoryOrItsSummary) {
  Scratch dir;
  dir.write("run/summary.json", R"({"overall": {"tasks": 1}, "levels": {}})");
  dir.write("run/results.jsonl", R"({"level": 1, "task_id": 1, "task_name": "1_T", "status": "ok"})"
                                 "\n");
  const ResultSet by_dir = ResultSet::load(dir.path("run"));
  EXPECT_EQ(by_dir.summary_file, dir.path("run/summary.json"));
  EXPECT_EQ(by_dir.lines.size(), 1u);
  EXPECT_EQ(ResultSet::load(dir.path("run/summary.json")).lines.size(), 1u);

  EXPECT_CONTAINS(input_error([&] { ResultSet::load(dir.path("nothing")); }), "does not exist");
  dir.write("bad/summary.json", "{");
  EXPECT_CONTAINS(input_error([&] { ResultSet::load(dir.path("bad")); }), "is not valid JSON");
  dir.write("other/summary.json", R"({"best_speedup": 2})");
  EXPECT_CONTAINS(input_error([&] { ResultSet::load(dir.path("other")); }),
                  "is not a cudal1 bench summary");
}

}  // namespace
}  // namespace cudal1::bench
