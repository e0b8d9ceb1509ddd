// The reward formulas of docs/rl.md, checked as numbers.
#include "cudal1/rl/reward_shaping.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

// One request of one reward each: the smoothing of a reward stream, one reward at a time.
double one(RewardSmoother& smoother, const std::string& task, double raw) {
  return smoother.score(task, {raw}).at(0);
}

TEST(RewardSmoother, ALoneFirstRewardOfATaskIsZero) {
  RewardSmoother smoother(64, 1.5);
  EXPECT_DOUBLE_EQ(one(smoother, "a", 11.2), 0.0);
}

TEST(RewardSmoother, ZScoreOverTheWindowIncludingTheNewReward) {
  RewardSmoother smoother(64, 10.0);
  one(smoother, "a", 1.0);
  // Window {1, 3}: mean 2, population deviation 1 -> z = (3 - 2) / 1.
  EXPECT_DOUBLE_EQ(one(smoother, "a", 3.0), 1.0);
  // Window {1, 3, 2}: mean 2, deviation sqrt(2/3) -> z = 0.
  EXPECT_DOUBLE_EQ(one(smoother, "a", 2.0), 0.0);
  // Window {1, 3, 2, 0}: mean 1.5, deviation sqrt(1.25) -> z = -1.5 / sqrt(1.25).
  EXPECT_NEAR(one(smoother, "a", 0.0), -1.5 / std::sqrt(1.25), 1e-12);
  const WindowStats stats = smoother.stats("a");
  EXPECT_EQ(stats.count, 4u);
  EXPECT_DOUBLE_EQ(stats.mean, 1.5);
}

TEST(RewardSmoother, ATasksFirstRequestIsNormalisedWithinItself) {
  // The first item of a task is no longer 0 whatever its speedup: {11.2, 1, 0} has mean 4.067
  // and deviation 4.98, so the 11.2x kernel is 1.43 above the rest.
  RewardSmoother smoother(64, 10.0);
  const auto scores = smoother.score("ln", {11.2, 1.0, 0.0});
  const double mean = 12.2 / 3;
  const double sd =
      std::sqrt(((11.2 - mean) * (11.2 - mean) + (1 - mean) * (1 - mean) + mean * mean) / 3);
  EXPECT_NEAR(scores[0], (11.2 - mean) / sd, 1e-12);
  EXPECT_NEAR(scores[1], (1.0 - mean) / sd, 1e-12);
  EXPECT_NEAR(scores[2], -mean / sd, 1e-12);
  EXPECT_GT(scores[0], 1.0);
}

TEST(RewardSmoother, EveryItemOfARequestIsScoredAgainstTheSameStatistics) {
  // The case: two hacks with raw 0 in one request, one after a 1.00x item. Before, the
  // second came back -0.447 and the first 0; now both get the same reward.
  RewardSmoother smoother(64, 1.5);
  const auto scores = smoother.score("t", {0.0, 1.0, 0.0, 1.0, 2.5});
  EXPECT_EQ(scores[0], scores[2]);
  EXPECT_EQ(scores[1], scores[3]);
  EXPECT_LT(scores[0], scores[1]);
  EXPECT_LT(scores[1], scores[4]);
  // The history before the request counts too, and the request's rewards join it afterwards.
  const WindowStats before = smoother.statistics("t", {0.5});
  EXPECT_EQ(before.count, 6u);
  EXPECT_DOUBLE_EQ(smoother.stats("t").mean, 4.5 / 5);
}

TEST(RewardSmoother, AnyPermutationOfARequestGivesTheSameAnswerPerItem) {
  // Property: for random histories and requests (ties included), every permutation scores each
  // item identically, to the bit, and leaves the same statistics for the next request.
  std::mt19937 random(2026);
  std::uniform_int_distribution<int> cents(0, 400);
  std::uniform_int_distribution<int> sizes(1, 12);
  for (int trial = 0; trial < 200; ++trial) {
    RewardSmoother a(16, 1.5), b(16, 1.5);
    std::vector<double> history;
    for (int i = 0, n = sizes(random); i < n; ++i)
      history.push_back(cents(random) / 100.0 * (i % 3 != 0));
    a.restore("t", history);
    b.restore("t", history);
    std::vector<double> request;
    for (int i = 0, n = sizes(random); i < n; ++i)
      request.push_back(cents(random) % 5 == 0 ? 0.0 : cents(random) / 100.0);
    std::vector<std::size_t> order(request.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    std::vector<double> shuffled;
    for (std::size_t i : order) shuffled.push_back(request[i]);
    const auto straight = a.score("t", request);
    const auto permuted = b.score("t", shuffled);
    for (std::size_t k = 0; k < order.size(); ++k) {
      EXPECT_EQ(permuted[k], straight[order[k]]) << "trial " << trial;
      // Equal in, equal out.
      for (std::size_t j = 0; j < request.size(); ++j) {
        if (request[j] == request[order[k]]) {
          EXPECT_EQ(straight[j], permuted[k]);
        }
      }
    }
    // Clipping holds for every item.
    for (double score : straight) EXPECT_LE(std::abs(score), 1.5);
    // The next request sees the same statistics (the window did not overflow within a request).
    if (request.size() + history.size() <= 16) {
      EXPECT_DOUBLE_EQ(a.stats("t").mean, b.stats("t").mean);
      EXPECT_EQ(a.score("t", {1.0}), b.score("t", {1.0}));
    }
  }
}

TEST(RewardSmoother, EqualRewardsWhoseMeanRoundsAwayStayZero) {
  // (1.4 + 1.4 + 1.4) / 3 is 1.4000000000000001: the deviation is rounding, not spread.
  RewardSmoother smoother(64, 1.5);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(one(smoother, "a", 1.4), 0.0);
  for (double score : smoother.score("a", {1.4, 1.4, 1.4})) EXPECT_DOUBLE_EQ(score, 0.0);
  for (double v : {0.1, 0.7, 2.3, 1.15}) {
    RewardSmoother each(64, 1.5);
    for (int i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(one(each, "b", v), 0.0) << v << " x" << i + 1;
  }
  // Equal rewards in a GRPO group, without epsilon: no preference either.
  const auto equal = group_advantages({1.4, 1.4, 1.4}, {"g", "g", "g"}, 0.0);
  for (const auto& a : equal) EXPECT_DOUBLE_EQ(*a, 0.0);
}

TEST(RewardSmoother, ClipsToPlusMinusClip) {
  RewardSmoother smoother(64, 1.5);
  for (int i = 0; i < 20; ++i) one(smoother, "a", 0.0);
  // Window {0 x20, 5}: mean 5/21, deviation sqrt(20)*5/21 -> z = sqrt(20) ~ 4.47, clipped.
  EXPECT_DOUBLE_EQ(one(smoother, "a", 5.0), 1.5);
  RewardSmoother low(64, 1.5);
  low.score("b", std::vector<double>(20, 2.0));
  EXPECT_DOUBLE_EQ(one(low, "b", 0.0), -1.5);
}

TEST(RewardSmoother, WindowDropsTheOldestAndTasksAreSeparate) {
  RewardSmoother smoother(2, 10.0);
  one(smoother, "a", 100.0);
  one(smoother, "a", 1.0);
  one(smoother, "a", 2.0);
  // The window before the request is {1, 2} (the 100 fell out); with the new 3: mean 2,
  // deviation sqrt(2/3).
  EXPECT_NEAR(one(smoother, "a", 3.0), 1.0 / std::sqrt(2.0 / 3.0), 1e-12);
  EXPECT_DOUBLE_EQ(one(smoother, "b", 3.0), 0.0);  // b's history is its own
  EXPECT_EQ(smoother.stats("a").count, 2u);
  // A request longer than the window is scored over all of it; the newest `window` stay.
  smoother.score("a", {5.0, 6.0, 7.0});
  EXPECT_EQ(smoother.stats("a").count, 2u);
  EXPECT_DOUBLE_EQ(smoother.stats("a").mean, 6.5);
}

TEST(RewardSmoother, RestoreKeepsTheNewestWindow) {
  RewardSmoother smoother(2, 10.0);
  smoother.restore("a", {100.0, 50.0, 1.0});  // only the last two stay: {50, 1}
  // The statistics of a request are the window before it and the request: {50, 1, 3}.
  const WindowStats stats = smoother.statistics("a", {3.0});
  EXPECT_EQ(stats.count, 3u);
  EXPECT_DOUBLE_EQ(stats.mean, 18.0);
  // A restored history gives the same answers as the history it was recorded from.
  RewardSmoother live(2, 10.0);
  for (double v : {100.0, 50.0, 1.0}) one(live, "a", v);
  EXPECT_EQ(live.score("a", {3.0, 0.0}), smoother.score("a", {3.0, 0.0}));
}

TEST(RewardSmoother, RefusesUselessSettings) {
  EXPECT_THROW(RewardSmoother(0, 1.5), std::invalid_argument);
  EXPECT_THROW(RewardSmoother(4, 0.0), std::invalid_argument);
}

TEST(GroupAdvantages, AShuffledGroupGetsTheSameAdvantagesToTheBit) {
  std::mt19937 random(7);
  std::uniform_real_distribution<double> values(0.0, 3.0);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> rewards;
    for (int i = 0; i < 8; ++i) rewards.push_back(i % 4 == 0 ? 0.0 : values(random));
    const std::vector<std::optional<std::string>> groups(rewards.size(), std::string("g"));
    std::vector<std::size_t> order(rewards.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), random);
    std::vector<double> shuffled;
    for (std::size_t i : order) shuffled.push_back(rewards[i]);
    const auto straight = group_advantages(rewards, groups, 1e-6);
    const auto permuted = group_advantages(shuffled, groups, 1e-6);
    for (std::size_t k = 0; k < order.size(); ++k) EXPECT_EQ(*permuted[k], *straight[order[k]]);
  }
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
