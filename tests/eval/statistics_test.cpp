#include "cudal1/eval/statistics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cudal1/eval/bucket_check.hpp"
#include "cudal1/eval/reward.hpp"
#include "cudal1/eval/stopping_rule.hpp"
#include "normal_samples.hpp"

namespace cudal1 {
namespace {

using test_support::normal_samples;

TEST(Statistics, QuantilesInterpolate) {
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1.0), 4);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 1.75);
  EXPECT_TRUE(std::isnan(median(std::vector<double>{})));
}

TEST(Statistics, BootstrapIntervalCoversTheTrueRatioAndShrinksWithSamples) {
  const auto ref_small = normal_samples(2.0, 0.1, 30, 1),
             cand_small = normal_samples(1.0, 0.05, 30, 2);
  const auto ref_big = normal_samples(2.0, 0.1, 3000, 3),
             cand_big = normal_samples(1.0, 0.05, 3000, 4);
  const Interval small = bootstrap_median_ratio(ref_small, cand_small, 1000, 0.95, 7);
  const Interval big = bootstrap_median_ratio(ref_big, cand_big, 1000, 0.95, 7);
  EXPECT_LT(small.low, 2.0);
  EXPECT_GT(small.high, 2.0);
  EXPECT_LT(big.low, 2.0);
  EXPECT_GT(big.high, 2.0);
  EXPECT_LT(big.high - big.low, (small.high - small.low) / 4);
}

TEST(Statistics, BootstrapIsDeterministicForASeed) {
  const auto a = normal_samples(2.0, 0.2, 50, 5), b = normal_samples(1.0, 0.1, 50, 6);
  const Interval x = bootstrap_median_ratio(a, b, 500, 0.95, 42);
  const Interval y = bootstrap_median_ratio(a, b, 500, 0.95, 42);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
}

TEST(Statistics, RelativeHalfWidth) {
  EXPECT_NEAR(relative_half_width({1.9, 2.1}, 2.0), 0.05, 1e-12);
  EXPECT_TRUE(std::isinf(relative_half_width({NAN, NAN}, 2.0)));
}

TEST(StoppingRule, WaitsForMinimumSamplesAndTime) {
  const NoiseCriterion rule;
  TimingProgress p{10, 5.0, 0.001, 0.0};
  EXPECT_EQ(rule.decide(p), NoiseCriterion::Decision::kContinue);
  p = {100, 0.1, 0.001, 0.0};
  EXPECT_EQ(rule.decide(p), NoiseCriterion::Decision::kContinue);
}

TEST(StoppingRule, StopsWhenNoiseAndBucketsAreWithinTarget) {
  const NoiseCriterion rule;
  EXPECT_EQ(rule.decide({100, 1.0, 0.009, 0.01}), NoiseCriterion::Decision::kConverged);
  EXPECT_EQ(rule.decide({100, 1.0, 0.011, 0.01}), NoiseCriterion::Decision::kContinue);
  EXPECT_EQ(rule.decide({100, 1.0, 0.009, 0.05}), NoiseCriterion::Decision::kContinue);
  EXPECT_EQ(rule.decide({100, 1.0, 0.009, std::nullopt}), NoiseCriterion::Decision::kContinue);
}

TEST(StoppingRule, SampleLimitEndsSampling) {
  NoiseCriterion::Params params;
  params.max_samples = 50;
  EXPECT_EQ(NoiseCriterion(params).decide({50, 1.0, 0.5, 0.5}),
            NoiseCriterion::Decision::kSampleLimit);
}

TEST(BucketCheck, StationarySamplesAgree) {
  const auto ref = normal_samples(2.0, 0.01, 200, 8), cand = normal_samples(1.0, 0.005, 200, 9);
  const auto check = check_buckets(ref, cand);
  ASSERT_TRUE(check);
  EXPECT_EQ(check->speedups.size(), 5u);
  EXPECT_LT(check->spread, 0.03);
}

TEST(BucketCheck, DriftIsDetected) {
  // The candidate gets 20 % slower half-way through (e.g. it throttles or changes behaviour).
  auto ref = normal_samples(2.0, 0.01, 200, 10), cand = normal_samples(1.0, 0.005, 200, 11);
  for (std::size_t i = 100; i < cand.size(); ++i) cand[i] *= 1.2;
  const auto check = check_buckets(ref, cand);
  ASSERT_TRUE(check);
  EXPECT_GT(check->spread, 0.15);
}

TEST(BucketCheck, NeedsEnoughSamples) {
  const std::vector<double> few(19, 1.0);
  EXPECT_FALSE(check_buckets(few, few));
}

TEST(Reward, RoundsTowardOne) {
  EXPECT_DOUBLE_EQ(conservative_reward(1.237), 1.23);
  EXPECT_DOUBLE_EQ(conservative_reward(1.23), 1.23);
  EXPECT_DOUBLE_EQ(conservative_reward(0.876), 0.88);
  EXPECT_DOUBLE_EQ(conservative_reward(0.88), 0.88);
  EXPECT_DOUBLE_EQ(conservative_reward(1.0), 1.0);
  EXPECT_DOUBLE_EQ(conservative_reward(12.3456), 12.34);
  EXPECT_DOUBLE_EQ(conservative_reward(0.0), 0.0);
  EXPECT_DOUBLE_EQ(conservative_reward(-1.0), 0.0);
  EXPECT_DOUBLE_EQ(conservative_reward(NAN), 0.0);
  EXPECT_DOUBLE_EQ(conservative_reward(INFINITY), 0.0);
}

TEST(Reward, NeverAboveWhatTheIntervalSupports) {
  // The case: 10.01x measured as [0.98, 11.38] from 13 samples pays 0.98.
  EXPECT_DOUBLE_EQ(interval_reward(10.01, 0.98), 0.98);
  EXPECT_DOUBLE_EQ(interval_reward(1.876, 1.85), 1.85);
  EXPECT_DOUBLE_EQ(interval_reward(1.876, 1.8599), 1.85);
  // A slower candidate pays its lower end too, rounded down (not toward 1).
  EXPECT_DOUBLE_EQ(interval_reward(0.876, 0.861), 0.86);
  // An interval that does not hold its point estimate pays at most the point.
  EXPECT_DOUBLE_EQ(interval_reward(1.2, 1.5), 1.2);
  // No usable lower end: the point estimate rounded toward 1.
  EXPECT_DOUBLE_EQ(interval_reward(1.237, std::nullopt), 1.23);
  EXPECT_DOUBLE_EQ(interval_reward(0.876, NAN), 0.88);
  EXPECT_DOUBLE_EQ(interval_reward(1.237, 0.0), 1.23);
  EXPECT_DOUBLE_EQ(interval_reward(NAN, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(interval_reward(-1.0, 1.0), 0.0);
  for (double low = 0.5; low < 20; low *= 1.37) {
    EXPECT_LE(interval_reward(30.0, low), low);
    EXPECT_GT(interval_reward(30.0, low), low - 0.01);
  }
}

}  // namespace
}  // namespace cudal1
