#include "cudal1/search/exemplar_sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

namespace cudal1::search {
namespace {

std::vector<PoolMember> pool_of(const std::vector<double>& speedups) {
  std::vector<PoolMember> pool;
  for (std::size_t i = 0; i < speedups.size(); ++i) {
    pool.push_back({static_cast<std::int64_t>(i + 1), speedups[i], static_cast<int>(i), i == 0});
  }
  return pool;
}

TEST(BucketProbabilities, SoftmaxOfCentredMeans) {
  const auto p = bucket_probabilities({0.0, std::log(2.0)}, 0.5);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[0] + p[1], 1.0, 1e-12);
  // exp((m - mean)/tau) ratio between the two buckets = exp(ln2 / 0.5) = 4.
  EXPECT_NEAR(p[1] / p[0], 4.0, 1e-9);
  const auto flat = bucket_probabilities({0.0, std::log(2.0)}, 1e9);
  EXPECT_NEAR(flat[0], 0.5, 1e-6);
  const auto huge = bucket_probabilities({0.0, 500.0}, 0.01);  // no overflow
  EXPECT_NEAR(huge[1], 1.0, 1e-12);
}

TEST(BucketSampler, ChoosesDistinctBucketsAndFavoursFasterOnes) {
  // Two slow members share a bucket; two fast members are each alone.
  const auto pool = pool_of({1.0, 1.01, 3.0, 6.0});
  const auto sampler = make_sampler("bucket");
  std::mt19937_64 rng(1);
  std::map<std::size_t, int> counts;
  for (int i = 0; i < 2000; ++i) {
    const auto chosen = sampler->choose(pool, 2, i, rng);
    ASSERT_EQ(chosen.size(), 2u);
    // Never both members of the shared slow bucket while other buckets are available.
    EXPECT_FALSE((chosen[0] <= 1 && chosen[1] <= 1));
    for (auto c : chosen) ++counts[c];
  }
  EXPECT_GT(counts[3], counts[0]);
  EXPECT_GT(counts[2], counts[1]);
}

TEST(BucketSampler, FillsFromAnyBucketWhenThereAreFewerBucketsThanK) {
  const auto pool = pool_of({1.0, 1.001, 1.002});
  std::mt19937_64 rng(2);
  const auto chosen = make_sampler("bucket")->choose(pool, 3, 0, rng);
  EXPECT_EQ(std::set<std::size_t>(chosen.begin(), chosen.end()).size(), 3u);
}

TEST(Samplers, NeverRepeatAndRespectK) {
  const auto pool = pool_of({1.0, 1.2, 0.8, 2.0, 5.0, 0.5});
  for (const char* name : {"bucket", "random", "islands"}) {
    const auto sampler = make_sampler(name);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 50; ++i) {
      const auto chosen = sampler->choose(pool, 3, i, rng);
      EXPECT_EQ(chosen.size(), 3u) << name;
      EXPECT_EQ(std::set<std::size_t>(chosen.begin(), chosen.end()).size(), chosen.size()) << name;
      for (auto c : chosen) EXPECT_LT(c, pool.size());
    }
    EXPECT_TRUE(sampler->choose({}, 2, 0, rng).empty());
    EXPECT_EQ(sampler->choose(pool_of({1.0}), 2, 0, rng).size(), 1u);
  }
}

TEST(RandomSampler, IsUniform) {
  const auto pool = pool_of({1.0, 9.0, 0.1, 2.0});
  std::mt19937_64 rng(4);
  std::map<std::size_t, int> counts;
  for (int i = 0; i < 4000; ++i) ++counts[make_sampler("random")->choose(pool, 1, i, rng)[0]];
  for (auto& [index, n] : counts) EXPECT_NEAR(n, 1000, 150) << index;
}

TEST(IslandSampler, StaysOnItsIslandExceptWhenMigrating) {
  SamplerOptions options;
  options.islands = 2;
  options.migration = 0.0;
  // Members 1 and 3 are on island 1, 2 and 4 on island 0 (member index = island id here).
  const auto pool = pool_of({1.0, 2.0, 3.0, 4.0, 5.0});
  std::mt19937_64 rng(5);
  const auto chosen = make_sampler("islands", options)->choose(pool, 2, /*sample_index=*/1, rng);
  for (auto c : chosen) EXPECT_TRUE(c == 0 || pool[c].island % 2 == 1) << c;
  EXPECT_EQ(pool[chosen[0]].speedup, 4.0);  // the island's best first
}

TEST(Samplers, UnknownNameIsRejected) {
  EXPECT_THROW(make_sampler("greedy"), std::invalid_argument);
}

}  // namespace
}  // namespace cudal1::search
