#include "cudal1/bench/score_statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace cudal1::bench {
namespace {

TEST(ScoreStatisticsTest, FastPCountsEveryTaskAndSpeedupsOnlySuccesses) {
  const std::vector<TaskScore> scores = {
      {"ok", 2.0},           {"ok", 0.5},       {"ok", 1.5}, {"incorrect", std::nullopt},
      {"missing", {}},       {"rejected", 3.0},  // timed, but a hack: never a success
      {"compile_error", {}}, {"ok", 1.0},
  };
  const ScoreStatistics stats = ScoreStatistics::of(scores);
  EXPECT_EQ(stats.tasks, 8u);
  EXPECT_EQ(stats.correct, 4u);
  EXPECT_DOUBLE_EQ(*stats.success_rate, 0.5);
  ASSERT_EQ(stats.fast.size(), 4u);
  EXPECT_DOUBLE_EQ(*stats.fast[0].second, 4.0 / 8);  // fast_0: every success
  EXPECT_DOUBLE_EQ(*stats.fast[1].second, 2.0 / 8);  // fast_1: strictly faster (1.0 is not)
  EXPECT_DOUBLE_EQ(*stats.fast[2].second, 1.0 / 8);  // fast_1.5: 1.5 is not > 1.5
  EXPECT_DOUBLE_EQ(*stats.fast[3].second, 0.0);      // fast_2: 2.0 is not > 2
  // Speedups of the successes: 0.5, 1.0, 1.5, 2.0.
  EXPECT_DOUBLE_EQ(*stats.mean, 1.25);
  EXPECT_DOUBLE_EQ(*stats.median, 1.25);
  EXPECT_NEAR(*stats.geomean, std::pow(0.5 * 1.0 * 1.5 * 2.0, 0.25), 1e-12);
  EXPECT_DOUBLE_EQ(*stats.p25, 0.875);  // linear: 1.0 - 0.25 * (1.0 - 0.5)
  EXPECT_DOUBLE_EQ(*stats.p75, 1.625);
  EXPECT_DOUBLE_EQ(*stats.max, 2.0);
}

TEST(ScoreStatisticsTest, JsonNamesTheThresholds) {
  const std::vector<TaskScore> scores = {{"ok", 3.0}, {"incorrect", {}}};
  const nlohmann::json json = ScoreStatistics::of(scores).to_json();
  const std::vector<std::string> keys = {"tasks",    "correct", "success_rate", "fast_0", "fast_1",
                                         "fast_1.5", "fast_2",  "mean",         "median", "geomean",
                                         "p25",      "p75",     "max"};
  EXPECT_EQ(json.size(), keys.size());
  for (const auto& key : keys) EXPECT_TRUE(json.contains(key)) << key;
  EXPECT_EQ(json["tasks"], 2);
  EXPECT_EQ(json["correct"], 1);
  EXPECT_DOUBLE_EQ(json["fast_1.5"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(json["geomean"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(json["p25"].get<double>(), 3.0);  // one value: every percentile is it
}

TEST(ScoreStatisticsTest, NoSuccessLeavesSpeedupStatisticsNull) {
  const std::vector<TaskScore> scores = {{"incorrect", {}}, {"missing", {}}};
  const nlohmann::json json = ScoreStatistics::of(scores).to_json();
  EXPECT_EQ(json["correct"], 0);
  EXPECT_DOUBLE_EQ(json["success_rate"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(json["fast_0"].get<double>(), 0.0);
  for (const char* key : {"mean", "median", "geomean", "p25", "p75", "max"}) {
    EXPECT_TRUE(json[key].is_null()) << key;
  }
}

TEST(ScoreStatisticsTest, EmptySetIsAllNull) {
  const nlohmann::json json = ScoreStatistics::of({}).to_json();
  EXPECT_EQ(json["tasks"], 0);
  EXPECT_TRUE(json["success_rate"].is_null());
  EXPECT_TRUE(json["fast_1"].is_null());
  EXPECT_TRUE(json["median"].is_null());
}

TEST(ScoreStatisticsTest, OkWithoutSpeedupIsNoSuccess) {
  EXPECT_FALSE(is_success({"ok", std::nullopt}));
  EXPECT_FALSE(is_success({"rejected", 2.0}));
  EXPECT_TRUE(is_success({"ok", 0.1}));
}

}  // namespace
}  // namespace cudal1::bench
