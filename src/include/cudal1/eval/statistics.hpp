// Order statistics and the bootstrap interval of a ratio of medians.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <span>
#include <vector>

namespace cudal1 {

// Linear-interpolated quantile (q in [0, 1]) of unsorted values; NaN when empty.
double quantile(std::span<const double> values, double q);
double median(std::span<const double> values);

struct Interval {
  double low = 0;
  double high = 0;
};

// Percentile bootstrap of median(numerator) / median(denominator), resampling both sides
// independently. `level` is the coverage (0.95). Deterministic for a given `seed`.
Interval bootstrap_median_ratio(std::span<const double> numerator,
                                std::span<const double> denominator, int resamples, double level,
                                std::uint64_t seed);

// One round of timing: the reference's and the candidate's kept samples.
struct RoundSamples {
  std::span<const double> numerator;
  std::span<const double> denominator;
};

// exp(mean(log v)) of positive values; NaN when empty.
double geometric_mean(std::span<const double> values);

// The geometric mean over rounds of median(numerator) / median(denominator).
double geometric_mean_ratio(std::span<const RoundSamples> rounds);

// Two-level percentile bootstrap of geometric_mean_ratio: each resample draws the rounds with
// replacement, then each drawn round's samples with replacement, so the interval holds the
// spread between rounds (fresh processes) as well as within them. Resampled means are spread
// about the estimate by sqrt(n / (n - 1)), the variance that drawing n of n rounds loses.
Interval bootstrap_rounds_ratio(std::span<const RoundSamples> rounds, int resamples, double level,
                                std::uint64_t seed);

// Half-width of the interval relative to the point estimate: the "relative noise" the stopping
// rule drives below its target.
double relative_half_width(const Interval& interval, double estimate);

struct SampleSummary {
  std::size_t count = 0;
  double median = 0;
  double p25 = 0;
  double p75 = 0;
  double min = 0;
  double max = 0;

  static SampleSummary of(std::span<const double> values);
  nlohmann::json to_json() const;
};

}  // namespace cudal1
