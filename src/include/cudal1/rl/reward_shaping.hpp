// The reward a trainer sees, from a verdict and the task's reward history (CUDA-L1, stage 3):
// the raw reward (speedup, or a floor for every failure and every hack), smoothing per task
// (a clipped z-score over the task's recent rewards), and GRPO advantages within a group. One
// place that `cudal1 serve`, the optimiser and the dataset exports share; docs/rl.md gives the
// formulas.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cudal1::rl {

struct RewardPolicy {
  // Every failure (incorrect, compile_error, runtime_error, timeout, unparseable) and every
  // verdict with a reject flag gets this raw reward. 0 is CUDA-L1's choice: a failed or hacked
  // candidate is worth nothing, below every correct one, however slow.
  double floor = 0.0;
  // The smoothed reward is clipped to [-clip, clip]; 1.5 is CUDA-L1's value, large enough to
  // rank a clearly better candidate above the crowd, small enough that one outlier (a timing
  // fluke the defenses missed) cannot dominate a policy update.
  double clip = 1.5;
  // How many of a task's most recent raw rewards the smoothing looks back over (the new one
  // included). Long enough for a stable mean and deviation, short enough to follow a policy
  // that improves during training.
  std::size_t window = 64;
  // Added to a group's standard deviation, so a group of equal rewards gives advantages of 0.
  double advantage_epsilon = 1e-6;
};

// The raw reward of a verdict: `verdict_reward` (the conservatively rounded speedup) when the
// status is "ok" and no flag of the reject set is present, else `floor`.
double raw_reward(std::string_view status, const std::vector<std::string>& flags,
                  double verdict_reward, double floor);

struct WindowStats {
  std::size_t count = 0;
  double mean = 0;
  double deviation = 0;  // population standard deviation of the window
};

// The count, mean and population deviation of `values` (a task's window, a trainer step's
// rewards); zeros when empty.
WindowStats window_stats(std::span<const double> values);

// Z-scores per task over the task's recent raw rewards. A request's items of one task are scored
// together: every one against the same statistics (the task's window before the request and all
// of the request's rewards of that task), so equal raw rewards get equal smoothed rewards and a
// permutation of the request changes no item's answer. Not thread-safe: the caller serialises
// requests (the order of requests is the order of the history).
class RewardSmoother {
 public:
  RewardSmoother(std::size_t window, double clip);

  // Smoothed rewards of `raws` (one request's raw rewards of `task`, in any order):
  // clip((raw - mean) / deviation) over the task's last `window` rewards before the request
  // together with all of `raws`, or 0 for each while that deviation is 0 (a lone first reward,
  // equal rewards). Then appends `raws` to the task's window in the given order, keeping the
  // newest `window` rewards.
  std::vector<double> score(const std::string& task, const std::vector<double>& raws);
  // The statistics `score` would use for `raws` now, without recording them.
  WindowStats statistics(const std::string& task, const std::vector<double>& raws) const;
  // Refills a task's window from recorded raw rewards, oldest first (a restarted server).
  void restore(const std::string& task, const std::vector<double>& raws);
  WindowStats stats(const std::string& task) const;

 private:
  std::size_t window_;
  double clip_;
  std::map<std::string, std::deque<double>> history_;
};

// GRPO advantages: (r - mean(group)) / (sd(group) + epsilon) for the members of each group,
// with the sample standard deviation (n - 1, as TRL and verl compute it); a group of one gets 0.
// `groups[i]` is item i's group, nullopt for an item without one (its advantage is nullopt).
std::vector<std::optional<double>> group_advantages(
    const std::vector<double>& rewards, const std::vector<std::optional<std::string>>& groups,
    double epsilon);

}  // namespace cudal1::rl
