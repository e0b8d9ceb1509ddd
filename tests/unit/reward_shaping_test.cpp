// The reward formulas of docs/rl.md, checked as numbers.
#include "cudal1/rl/reward_shaping.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace cudal1::rl {
namespace {

TEST(RawReward, OkVerdictPaysItsRoundedSpeedup) {
  EXPECT_DOUBLE_EQ(raw_reward("ok", {}, 1.23, 0.0), 1.23);
  EXPECT_DOUBLE_EQ(raw_reward("ok", {"noisy", "extra_streams"}, 0.88, 0.0), 0.88);
}

TEST(RawReward, FailuresAndRejectFlagsGetTheFloor) {
  for (const char* status :
       {"incorrect", "rejected", "compile_error", "runtime_error", "timeout", "unparseable"}) {
    EXPECT_DOUBLE_EQ(raw_reward(status, {}, 2.0, -0.5), -0.5) << status;
  }
  // A reject flag on an "ok" status (a verdict recorded before finalize) is still the floor.
  EXPECT_DOUBLE_EQ(raw_reward("ok", {"cached_output"}, 3.0, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(raw_reward("ok", {"review_rejected"}, 3.0, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(raw_reward("ok", {}, NAN, 0.25), 0.25);
}

TEST(RewardSmoother, FirstRewardOfATaskIsZero) {
  RewardSmoother smoother(64, 1.5);
  EXPECT_DOUBLE_EQ(smoother.add("a", 1.7), 0.0);
}

TEST(RewardSmoother, ZScoreOverTheWindowIncludingTheNewReward) {
  RewardSmoother smoother(64, 10.0);
  smoother.add("a", 1.0);
  // Window {1, 3}: mean 2, population deviation 1 -> z = (3 - 2) / 1.
  EXPECT_DOUBLE_EQ(smoother.add("a", 3.0), 1.0);
  // Window {1, 3, 2}: mean 2, deviation sqrt(2/3) -> z = 0.
  EXPECT_DOUBLE_EQ(smoother.add("a", 2.0), 0.0);
  // Window {1, 3, 2, 0}: mean 1.5, deviation sqrt(1.25) -> z = -1.5 / sqrt(1.25).
  EXPECT_NEAR(smoother.add("a", 0.0), -1.5 / std::sqrt(1.25), 1e-12);
  const WindowStats stats = smoother.stats("a");
  EXPECT_EQ(stats.count, 4u);
  EXPECT_DOUBLE_EQ(stats.mean, 1.5);
}

TEST(RewardSmoother, EqualRewardsWhoseMeanRoundsAwayStayZero) {
  // (1.4 + 1.4 + 1.4) / 3 is 1.4000000000000001: the deviation is rounding, not spread.
  RewardSmoother smoother(64, 1.5);
  EXPECT_DOUBLE_EQ(smoother.add("a", 1.4), 0.0);
  EXPECT_DOUBLE_EQ(smoother.add("a", 1.4), 0.0);
  EXPECT_DOUBLE_EQ(smoother.add("a", 1.4), 0.0);
  EXPECT_DOUBLE_EQ(smoother.add("a", 1.4), 0.0);
  for (double v : {0.1, 0.7, 2.3, 1.15}) {
    RewardSmoother each(64, 1.5);
    for (int i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(each.add("b", v), 0.0) << v << " x" << i + 1;
  }
  // Equal rewards in a GRPO group, without epsilon: no preference either.
  const auto equal = group_advantages({1.4, 1.4, 1.4}, {"g", "g", "g"}, 0.0);
  for (const auto& a : equal) EXPECT_DOUBLE_EQ(*a, 0.0);
}

TEST(RewardSmoother, ClipsToPlusMinusClip) {
  RewardSmoother smoother(64, 1.5);
  for (int i = 0; i < 20; ++i) smoother.add("a", 0.0);
  // Window {0 x20, 5}: mean 5/21, deviation sqrt(20)*5/21 -> z = sqrt(20) ~ 4.47, clipped.
  EXPECT_DOUBLE_EQ(smoother.add("a", 5.0), 1.5);
  RewardSmoother low(64, 1.5);
  for (int i = 0; i < 20; ++i) low.add("b", 2.0);
  EXPECT_DOUBLE_EQ(low.add("b", 0.0), -1.5);
}

TEST(RewardSmoother, WindowDropsTheOldestAndTasksAreSeparate) {
  RewardSmoother smoother(2, 10.0);
  smoother.add("a", 100.0);
  smoother.add("a", 1.0);
  // Window {1, 3}: the 100 fell out.
  EXPECT_DOUBLE_EQ(smoother.add("a", 3.0), 1.0);
  EXPECT_DOUBLE_EQ(smoother.add("b", 3.0), 0.0);  // b's history is its own
  EXPECT_EQ(smoother.stats("a").count, 2u);
}

TEST(RewardSmoother, RestoreKeepsTheNewestWindow) {
  RewardSmoother smoother(2, 10.0);
  smoother.restore("a", {100.0, 50.0, 1.0});  // only the last two stay: {50, 1}
  // The add pushes 50 out: window {1, 3}, z = 1.
  EXPECT_DOUBLE_EQ(smoother.add("a", 3.0), 1.0);
}

TEST(RewardSmoother, RefusesUselessSettings) {
  EXPECT_THROW(RewardSmoother(0, 1.5), std::invalid_argument);
  EXPECT_THROW(RewardSmoother(4, 0.0), std::invalid_argument);
}

TEST(GroupAdvantages, NormalisedWithinEachGroupWithSampleDeviation) {
  const std::vector<double> rewards = {1.0, 2.0, 3.0, 10.0, 0.5};
  const std::vector<std::optional<std::string>> groups = {"g", "g", "g", "h", std::nullopt};
  const auto a = group_advantages(rewards, groups, 0.0);
  // Group g: mean 2, sample deviation 1.
  EXPECT_DOUBLE_EQ(*a[0], -1.0);
  EXPECT_DOUBLE_EQ(*a[1], 0.0);
  EXPECT_DOUBLE_EQ(*a[2], 1.0);
  EXPECT_DOUBLE_EQ(*a[3], 0.0);  // a group of one
  EXPECT_FALSE(a[4].has_value());
}

TEST(GroupAdvantages, EqualRewardsGiveZeroAndMeansAreZero) {
  const auto equal = group_advantages({1.5, 1.5, 1.5}, {"g", "g", "g"}, 1e-6);
  for (const auto& a : equal) EXPECT_DOUBLE_EQ(*a, 0.0);
  const auto mixed = group_advantages({0.0, 1.2, 0.7, 3.1}, {"x", "x", "x", "x"}, 1e-6);
  double sum = 0;
  for (const auto& a : mixed) sum += *a;
  EXPECT_NEAR(sum, 0.0, 1e-12);
  EXPECT_THROW(group_advantages({1.0}, {}, 1e-6), std::invalid_argument);
}

}  // namespace
}  // namespace cudal1::rl
