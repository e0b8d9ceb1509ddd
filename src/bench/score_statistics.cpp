#include "cudal1/bench/score_statistics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cudal1/eval/statistics.hpp"

namespace cudal1::bench {
namespace {

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

}  // namespace

bool is_success(const TaskScore& score) {
  return score.status == "ok" && score.speedup.has_value() && *score.speedup > 0;
}

std::string fast_name(double threshold) {
  return fmt::format("fast_{}", threshold);
}

ScoreStatistics ScoreStatistics::of(std::span<const TaskScore> scores) {
  ScoreStatistics stats;
  stats.tasks = scores.size();
  std::vector<double> speedups;
  for (const auto& score : scores) {
    if (is_success(score)) speedups.push_back(*score.speedup);
  }
  stats.correct = speedups.size();
  for (double threshold : kFastThresholds) {
    std::optional<double> fraction;
    if (stats.tasks > 0) {
      const auto faster = std::count_if(speedups.begin(), speedups.end(),
                                        [threshold](double s) { return s > threshold; });
      fraction = static_cast<double>(faster) / static_cast<double>(stats.tasks);
    }
    stats.fast.emplace_back(threshold, fraction);
  }
  if (stats.tasks > 0) {
    stats.success_rate = static_cast<double>(stats.correct) / static_cast<double>(stats.tasks);
  }
  if (speedups.empty()) return stats;
  const double n = static_cast<double>(speedups.size());
  stats.mean = std::accumulate(speedups.begin(), speedups.end(), 0.0) / n;
  double log_sum = 0;
  for (double s : speedups) log_sum += std::log(s);
  stats.geomean = std::exp(log_sum / n);
  stats.median = quantile(speedups, 0.5);
  stats.p25 = quantile(speedups, 0.25);
  stats.p75 = quantile(speedups, 0.75);
  stats.max = *std::max_element(speedups.begin(), speedups.end());
  return stats;
}

nlohmann::json ScoreStatistics::to_json() const {
  nlohmann::json out = {
      {"tasks", tasks}, {"correct", correct}, {"success_rate", optional_number(success_rate)}};
  for (const auto& [threshold, fraction] : fast)
    out[fast_name(threshold)] = optional_number(fraction);
  out["mean"] = optional_number(mean);
  out["median"] = optional_number(median);
  out["geomean"] = optional_number(geomean);
  out["p25"] = optional_number(p25);
  out["p75"] = optional_number(p75);
  out["max"] = optional_number(max);
  return out;
}

}  // namespace cudal1::bench
