// Statistics of a set of benchmark results: success rate, fast_p, and the distribution of the
// speedups of the successful tasks (KernelBench's fast_p; CUDA-L1's mean/median/percentiles).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cudal1::bench {

// One task's outcome as the statistics see it.
struct TaskScore {
  std::string status;             // a verdict status, "missing", or "unavailable"
  std::optional<double> speedup;  // when timed
};

// A task counts as a success when its status is "ok": correct on every trial, timed, and not
// rejected by a hack check.
bool is_success(const TaskScore& score);

// The thresholds p of fast_p, and their JSON names ("fast_1.5").
inline constexpr double kFastThresholds[] = {0.0, 1.0, 1.5, 2.0};
std::string fast_name(double threshold);

struct ScoreStatistics {
  std::size_t tasks = 0;    // every task of the set
  std::size_t correct = 0;  // successes
  // fast_p: the fraction of ALL tasks that are successes with speedup > p (null with no task).
  std::vector<std::pair<double, std::optional<double>>> fast;
  std::optional<double> success_rate;  // correct / tasks
  // Over the successes' speedups (null when there is none). Percentiles interpolate linearly
  // between order statistics (the "linear" method of numpy.percentile).
  std::optional<double> mean, median, geomean, p25, p75, max;

  static ScoreStatistics of(std::span<const TaskScore> scores);
  // {"tasks", "correct", "success_rate", "fast_0", "fast_1", "fast_1.5", "fast_2", "mean",
  //  "median", "geomean", "p25", "p75", "max"}
  nlohmann::json to_json() const;
};

}  // namespace cudal1::bench
