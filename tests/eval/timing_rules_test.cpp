// The rules of the timing phases, as numbers: when warm-up ends, when sampling stops, how many
// pairs a request takes, which pairs are spot-checked or traced, when the unseen check stops.
#include "cudal1/eval/timing_rules.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace cudal1 {
namespace timing_rules_test {

// At least 3 warm-up calls, 0.1 s of calls a side, 0.25 s of wall time at most.
TimingConfig warmup_config() {
  TimingConfig config;
  config.min_warmup_calls = 3;
  config.min_warmup_s = 0.1;
  config.max_warmup_wall_s = 0.25;
  config.budget_s = 30;
  return config;
}

TEST(WarmupRule, TakesTheMinimumCallsThenTimeUntilTheWallCap) {
  const TimingConfig config = warmup_config();
  const WarmupRule rule(config, 1);
  EXPECT_EQ(rule.min_calls(), 3u);
  EXPECT_TRUE(rule.more(2, 1e6, 1e6, 100));  // fewer calls than the minimum, whatever the time
  EXPECT_TRUE(rule.more(3, 50, 200, 0.1));   // one side under 100 ms of calls, within the cap
  EXPECT_FALSE(rule.more(3, 50, 200, 0.3));  // ... past the wall-time cap
  EXPECT_FALSE(rule.more(3, 100, 100, 0));   // both sides warm
}

TEST(WarmupRule, EveryStreamGetsACallAndTheCapIsAQuarterOfTheBudget) {
  TimingConfig config;
  config.min_warmup_calls = 3;
  config.max_warmup_wall_s = 0.25;
  config.budget_s = 0.4;
  const WarmupRule rule(config, 5);
  EXPECT_EQ(rule.min_calls(), 5u);
  EXPECT_DOUBLE_EQ(rule.wall_cap_s(), 0.1);
}

TEST(WarmupRule, AfterAWarmUpUnderTheSharedHoldOnlyTheClockIsLeftToWarm) {
  TimingConfig config = warmup_config();
  config.prewarmed_sets = 40;
  config.exclusive_warmup_s = 0.02;
  const WarmupRule rule(config, 1);
  EXPECT_EQ(rule.min_calls(), 3u);  // the minimum of calls stays
  EXPECT_DOUBLE_EQ(rule.wall_cap_s(), 0.02);
  EXPECT_TRUE(rule.more(2, 1e6, 1e6, 1));
  EXPECT_FALSE(rule.more(3, 20, 20, 0));    // 20 ms of calls a side is enough ...
  EXPECT_TRUE(rule.more(3, 5, 30, 0.01));   // ... not 5, within the cap
  EXPECT_FALSE(rule.more(3, 5, 30, 0.03));  // past it
  // On the window clock (a CPU's) no hold is sized from these calls: one is left.
  config.mode = "window";
  EXPECT_EQ(WarmupRule(config, 1).min_calls(), 1u);
  EXPECT_EQ(WarmupRule(config, 4).min_calls(), 4u);  // one per stream
}

TEST(HoldTimeout, IsTheFactorTimesTheSlowestCallWithinTheBounds) {
  TimingConfig config;  // factor 10, bounds 50 and 500 ms
  EXPECT_DOUBLE_EQ(hold_timeout_ms(config, 1), 50);
  EXPECT_DOUBLE_EQ(hold_timeout_ms(config, 12), 120);
  EXPECT_DOUBLE_EQ(hold_timeout_ms(config, 80), 500);
}

TEST(SamplingStop, AsksAtTheMinimumThenAfterEveryTenthMore) {
  TimingConfig config;
  config.noise.min_samples = 20;
  config.noise.min_time_s = 0;
  SamplingStop stop(config);
  EXPECT_FALSE(stop.due(19));
  EXPECT_EQ(stop.pairs_until_check(15), std::optional<std::size_t>(5));
  ASSERT_TRUE(stop.due(20));
  // A speedup that moves between halves of the samples: not stationary, go on.
  std::vector<double> ref(20, 1.0), cand(20, 0.5);
  for (std::size_t i = 10; i < 20; ++i) cand[i] = 0.25;
  EXPECT_EQ(stop.check(ref, cand, 1.0, 7), NoiseCriterion::Decision::kContinue);
  EXPECT_EQ(stop.progress().pairs, 20u);
  EXPECT_FALSE(stop.due(24));  // next at 20 + max(5, 2)
  EXPECT_TRUE(stop.due(25));
  EXPECT_STREQ(stop.stop_reason(), "time_budget");
  std::vector<double> ref2(200, 1.0), cand2(200, 0.5);
  ASSERT_TRUE(stop.due(200));
  EXPECT_EQ(stop.check(ref2, cand2, 1.0, 7), NoiseCriterion::Decision::kConverged);
  EXPECT_DOUBLE_EQ(stop.speedup(), 2.0);
  EXPECT_TRUE(stop.converged());
  EXPECT_STREQ(stop.stop_reason(), "converged");
  EXPECT_FALSE(stop.due(219));  // a tenth of 200 more
  EXPECT_TRUE(stop.due(220));
  stop.restart();
  EXPECT_TRUE(stop.due(20));
  stop.give_up();
  EXPECT_FALSE(stop.converged());
}

TEST(SamplingStop, StopsAtTheSampleLimit) {
  TimingConfig config;
  config.noise.min_samples = 4;
  config.noise.max_samples = 4;
  SamplingStop stop(config);
  EXPECT_EQ(stop.check({1, 2, 3, 4}, {4, 3, 2, 1}, 0, 1), NoiseCriterion::Decision::kSampleLimit);
  EXPECT_STREQ(stop.stop_reason(), "sample_limit");
}

TEST(SamplingBudget, EndsAtTheBudgetUnlessNoPairCountedYet) {
  const auto start = Clock::now();
  const SamplingBudget budget(start, 1.0, 2.0);
  EXPECT_EQ(budget.hard_deadline(), start + std::chrono::seconds(3));
  EXPECT_TRUE(budget.time_left(true, start + std::chrono::milliseconds(999)));
  EXPECT_FALSE(budget.time_left(true, start + std::chrono::milliseconds(1001)));
  // No pair measured yet: sampling goes on until the hard deadline.
  EXPECT_TRUE(budget.time_left(false, start + std::chrono::milliseconds(2999)));
  EXPECT_FALSE(budget.time_left(false, start + std::chrono::milliseconds(3001)));
}

TEST(PairsPerRequest, FillsTheBatchTimeUpToTheNextCheck) {
  TimingConfig config;                          // max_batch 64, batch_s 0.02
  EXPECT_EQ(batch_fill(config, 0), 1u);         // no rate measured yet
  EXPECT_EQ(batch_fill(config, 0.001), 20u);    // 20 ms at 1 ms a pair
  EXPECT_EQ(batch_fill(config, 0.00001), 64u);  // at most max_batch
  EXPECT_EQ(batch_fill(config, 1), 1u);
  EXPECT_EQ(pairs_per_request(config, 0.001, 7), 7u);
  EXPECT_EQ(pairs_per_request(config, 0.001, std::nullopt), 20u);
  EXPECT_EQ(pairs_per_request(config, 0.001, 0), 1u);
  config.max_batch = 1;
  EXPECT_EQ(pairs_per_request(config, 0.00001, 50), 1u);
}

TEST(SpotCheckSchedule, ChecksOnePairInEveryFewAndNoneWhenOff) {
  std::mt19937_64 schedule(3);
  SpotCheckSchedule off;
  EXPECT_FALSE(off.on());
  EXPECT_FALSE(off.in_batch(0, 1000));

  SpotCheckSchedule spots(8, 0.25, schedule);
  ASSERT_TRUE(spots.on());
  // The first checked pair is among the first 8.
  const auto first = spots.in_batch(0, 8);
  ASSERT_TRUE(first);
  EXPECT_LT(*first, 8u);
  // Cheap checks: the next one within twice the mean gap (8) after the pairs taken.
  spots.checked(0.001, 8, 1.0, schedule);
  EXPECT_DOUBLE_EQ(spots.seconds(), 0.001);
  EXPECT_FALSE(spots.in_batch(0, 8));
  const auto next = spots.in_batch(8, 16);
  ASSERT_TRUE(next);
  EXPECT_LT(*next, 16u);
  spots.add_time(0.5);
  EXPECT_DOUBLE_EQ(spots.seconds(), 0.501);
}

TEST(SpotCheckSchedule, SpacesOutSlowChecks) {
  // A check of 1 s next to plain pairs of 7.8 ms: at a share of 0.25, 384 pairs between checks.
  EXPECT_EQ(spot_check_mean_gap(1.0, 0.0078125, 8, 0.25), 384u);
  EXPECT_EQ(spot_check_mean_gap(0.001, 0.01, 8, 0.25), 8u);
  EXPECT_EQ(spot_check_mean_gap(1.0, 0, 8, 0.25), 8u);
}

TEST(TracedPairSchedule, TracesAllQueuedPairsAndSomeWindowPairs) {
  std::mt19937_64 schedule(5);
  TracedPairSchedule traced(schedule);
  const auto queued = traced.plan(0, 4, /*window=*/false, true, schedule);
  EXPECT_EQ(queued, std::vector<bool>(4, true));
  const auto untraceable = traced.plan(0, 40, /*window=*/true, false, schedule);
  EXPECT_EQ(untraceable, std::vector<bool>(40, false));
  std::size_t count = 0;
  for (std::size_t first = 0; first < 800; first += 40) {
    for (bool t : traced.plan(first, 40, true, true, schedule)) count += t ? 1 : 0;
  }
  // About one in 8, spread at random: between 1 in 16 and 1 in 4 of 800.
  EXPECT_GT(count, 50u);
  EXPECT_LT(count, 200u);
  traced.restart(1000, schedule);
  const auto after = traced.plan(1000, 8, true, true, schedule);
  EXPECT_GE(std::count(after.begin(), after.end(), true), 1);
}

TEST(UnseenLookRule, AStrongFirstLookNeedsConfirmation) {
  UnseenComparison first;
  first.tripped = true;
  const UnseenLookRule rule(first, 1.5);
  UnseenComparison second;
  second.inflation = 3;
  second.inflation_low = 1.2;
  EXPECT_TRUE(rule.confirmed(second));
  EXPECT_TRUE(rule.decided(second));
  second.inflation_low = 0.9;  // its interval reaches no gain
  EXPECT_FALSE(rule.confirmed(second));
  EXPECT_FALSE(rule.decided(second));
  EXPECT_TRUE(rule.look_again(1, true, second));
  EXPECT_FALSE(rule.look_again(1, false, second));  // sets not made alike
  EXPECT_FALSE(rule.look_again(UnseenLookRule::kMaxLooks, true, second));
  second.inflation = 1.1;  // under the limit: not cleared after a strong first look
  EXPECT_FALSE(rule.decided(second));
}

TEST(UnseenLookRule, AFirstLookUnderTheLimitNeedsTwoLooksToTrip) {
  UnseenComparison first;
  first.inflation = 0.85;  // under the limit: a second look only because the load changed
  const UnseenLookRule rule(first, 2.0);
  UnseenComparison second;
  second.inflation = 3.47;
  second.inflation_low = 2.34;
  second.tripped = true;
  EXPECT_TRUE(rule.look_again(1, true, second));  // one look's four pairs are not enough
  EXPECT_FALSE(rule.look_again(1, false, second));
  EXPECT_FALSE(rule.look_again(2, true, second));  // still tripped with the next look's pairs
  second.tripped = false;
  second.inflation = 1.1;
  EXPECT_FALSE(rule.look_again(1, true, second));  // cleared at once
  // A first look over the limit but not decisive: a tripped second look decides.
  UnseenComparison weak;
  weak.inflation = 2.5;
  const UnseenLookRule over(weak, 2.0);
  second.tripped = true;
  EXPECT_FALSE(over.look_again(1, true, second));
}

TEST(UnseenLookRule, AWeakFirstLookIsClearedUnderTheLimit) {
  UnseenComparison first;
  first.inflation = 2;  // over the limit, not decisive
  const UnseenLookRule rule(first, 1.5);
  UnseenComparison second;
  second.inflation = 1.2;
  second.inflation_low = 1.1;
  EXPECT_FALSE(rule.confirmed(second));
  EXPECT_TRUE(rule.decided(second));
  second.inflation = 2;
  EXPECT_FALSE(rule.decided(second));
  second.tripped = true;
  EXPECT_TRUE(rule.decided(second));
}

}  // namespace timing_rules_test
}  // namespace cudal1
