// Seeded normally distributed samples for the statistics tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace cudal1::test_support {

inline std::vector<double> normal_samples(double mean, double sd, std::size_t n,
                                          std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(mean, sd);
  std::vector<double> out(n);
  for (auto& v : out) v = dist(rng);
  return out;
}

}  // namespace cudal1::test_support
