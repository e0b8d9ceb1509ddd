#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "cudal1/llm/client.hpp"

namespace cudal1::llm {
namespace {

ClientOptions backoff(double initial_s, double max_s) {
  ClientOptions options;
  options.backoff_initial_s = initial_s;
  options.backoff_max_s = max_s;
  return options;
}

std::vector<double> delays(RetryPolicy& policy, int retry, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(policy.delay_s(retry, std::nullopt));
  return out;
}

TEST(RetryPolicy, RetriesExactlyTheTransientStatuses) {
  const std::set<int> expected = {0, 408, 409, 429};
  for (int status = 0; status < 700; ++status) {
    const bool transient = expected.count(status) > 0 || (status >= 500 && status <= 599);
    EXPECT_EQ(RetryPolicy::retryable(status), transient) << "HTTP " << status;
  }
}

TEST(RetryPolicy, DelaysGrowExponentiallyWithinTheirCeiling) {
  RetryPolicy policy(backoff(0.5, 1000), 7);
  for (int retry = 1; retry <= 6; ++retry) {
    const double ceiling = 0.5 * (1 << (retry - 1));
    const auto sample = delays(policy, retry, 2000);
    const auto [low, high] = std::minmax_element(sample.begin(), sample.end());
    EXPECT_GE(*low, 0.0) << "retry " << retry;
    EXPECT_LE(*high, ceiling) << "retry " << retry;
    // Full jitter covers the whole interval: the extremes come close to both ends.
    EXPECT_LT(*low, 0.05 * ceiling) << "retry " << retry;
    EXPECT_GT(*high, 0.95 * ceiling) << "retry " << retry;
    double mean = 0;
    for (double d : sample) mean += d / sample.size();
    EXPECT_NEAR(mean, ceiling / 2, 0.05 * ceiling) << "retry " << retry;
  }
}

TEST(RetryPolicy, DelaysStopGrowingAtTheCap) {
  RetryPolicy policy(backoff(1, 5), 3);
  for (int retry : {4, 10, 100, 100000}) {
    const auto sample = delays(policy, retry, 500);
    EXPECT_LE(*std::max_element(sample.begin(), sample.end()), 5.0) << "retry " << retry;
    EXPECT_GT(*std::max_element(sample.begin(), sample.end()), 4.5) << "retry " << retry;
  }
}

TEST(RetryPolicy, JitterIsDeterministicPerSeedAndDiffersAcrossSeeds) {
  RetryPolicy first(backoff(1, 60), 42);
  RetryPolicy again(backoff(1, 60), 42);
  RetryPolicy other(backoff(1, 60), 43);
  const auto a = delays(first, 3, 20);
  EXPECT_EQ(a, delays(again, 3, 20));
  EXPECT_NE(a, delays(other, 3, 20));
  EXPECT_GT(std::set<double>(a.begin(), a.end()).size(), 15u) << "delays barely vary";
}

TEST(RetryPolicy, RetryAfterTakesPrecedenceUpToTenMinutes) {
  RetryPolicy policy(backoff(0.01, 0.02), 1);
  EXPECT_DOUBLE_EQ(policy.delay_s(1, 7.0), 7.0);
  EXPECT_DOUBLE_EQ(policy.delay_s(5, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(policy.delay_s(1, 3600.0), 600.0);
  EXPECT_DOUBLE_EQ(policy.delay_s(1, -5.0), 0.0);
  EXPECT_LE(policy.delay_s(1, std::nullopt), 0.01);
}

}  // namespace
}  // namespace cudal1::llm
