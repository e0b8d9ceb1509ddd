#include "cudal1/eval/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cudal1 {
namespace {

double sorted_quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const auto above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

// Median of a resample drawn with replacement, via nth_element on a scratch buffer.
double resampled_median(std::span<const double> values, std::vector<double>& scratch,
                        std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
  scratch.resize(values.size());
  for (auto& v : scratch) v = values[pick(rng)];
  const std::size_t mid = scratch.size() / 2;
  std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(mid),
                   scratch.end());
  const double upper = scratch[mid];
  if (scratch.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

}  // namespace

double quantile(std::span<const double> values, double q) {
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted_quantile(sorted, q);
}

double median(std::span<const double> values) {
  return quantile(values, 0.5);
}

Interval bootstrap_median_ratio(std::span<const double> numerator,
                                std::span<const double> denominator, int resamples, double level,
                                std::uint64_t seed) {
  if (numerator.empty() || denominator.empty() || resamples < 2) return {NAN, NAN};
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, scratch;
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    const double top = resampled_median(numerator, scratch, rng);
    const double bottom = resampled_median(denominator, scratch, rng);
    ratios.push_back(top / bottom);
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1.0 - level) / 2.0;
  return {sorted_quantile(ratios, tail), sorted_quantile(ratios, 1.0 - tail)};
}

double geometric_mean(std::span<const double> values) {
  if (values.empty()) return NAN;
  double log_sum = 0;
  for (double v : values) log_sum += std::log(v);
  return std::exp(log_sum / static_cast<double>(values.size()));
}

double geometric_mean_ratio(std::span<const RoundSamples> rounds) {
  std::vector<double> ratios;
  for (const auto& round : rounds) {
    ratios.push_back(median(round.numerator) / median(round.denominator));
  }
  return geometric_mean(ratios);
}

Interval bootstrap_rounds_ratio(std::span<const RoundSamples> rounds, int resamples, double level,
                                std::uint64_t seed) {
  if (rounds.empty() || resamples < 2) return {NAN, NAN};
  for (const auto& round : rounds) {
    if (round.numerator.empty() || round.denominator.empty()) return {NAN, NAN};
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::size_t> pick_round(0, rounds.size() - 1);
  const double n = static_cast<double>(rounds.size());
  const double centre = std::log(geometric_mean_ratio(rounds));
  // Resampling n rounds with replacement spreads their mean by only (n - 1) / n of its variance;
  // the deviations are scaled back up (with one round there is nothing between rounds to scale).
  const double inflate = rounds.size() > 1 ? std::sqrt(n / (n - 1)) : 1.0;
  std::vector<double> ratios, scratch;
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    double log_sum = 0;
    for (std::size_t k = 0; k < rounds.size(); ++k) {
      const auto& round = rounds[pick_round(rng)];
      const double top = resampled_median(round.numerator, scratch, rng);
      const double bottom = resampled_median(round.denominator, scratch, rng);
      log_sum += std::log(top / bottom);
    }
    ratios.push_back(std::exp(centre + inflate * (log_sum / n - centre)));
  }
  std::sort(ratios.begin(), ratios.end());
  const double tail = (1.0 - level) / 2.0;
  return {sorted_quantile(ratios, tail), sorted_quantile(ratios, 1.0 - tail)};
}

double relative_half_width(const Interval& interval, double estimate) {
  if (!(estimate > 0) || std::isnan(interval.low) || std::isnan(interval.high)) return INFINITY;
  return (interval.high - interval.low) / (2.0 * estimate);
}

SampleSummary SampleSummary::of(std::span<const double> values) {
  SampleSummary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  s.median = sorted_quantile(sorted, 0.5);
  s.p25 = sorted_quantile(sorted, 0.25);
  s.p75 = sorted_quantile(sorted, 0.75);
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

nlohmann::json SampleSummary::to_json() const {
  return {{"count", count}, {"median_ms", median}, {"p25_ms", p25},
          {"p75_ms", p75},  {"min_ms", min},       {"max_ms", max}};
}

}  // namespace cudal1
