#include "cudal1/rl/reward_shaping.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "cudal1/eval/verdict.hpp"

namespace cudal1::rl {
namespace {

// A deviation this small next to the values is rounding, not spread: the mean of three rewards
// of 1.4 is 1.4000000000000001, and their deviation 1.3e-16 made a z-score of -1 out of equal
// rewards (the third reward of serve.drain_restart came out 1.0 instead of 0).
bool no_spread(double deviation, double mean) {
  return !(deviation > 1e-9 * std::max(1.0, std::abs(mean)));
}

}  // namespace

WindowStats window_stats(std::span<const double> values) {
  WindowStats stats;
  stats.count = values.size();
  if (values.empty()) return stats;
  double sum = 0;
  for (double v : values) sum += v;
  stats.mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - stats.mean) * (v - stats.mean);
  stats.deviation = std::sqrt(squares / static_cast<double>(values.size()));
  return stats;
}

namespace {

// A smoother's window is a deque (the oldest reward leaves from the front); at most a few hundred
// rewards, copied to be measured.
WindowStats stats_of(const std::deque<double>& window) {
  return window_stats(std::vector<double>(window.begin(), window.end()));
}

}  // namespace

double raw_reward(std::string_view status, const std::vector<std::string>& flags,
                  double verdict_reward, double floor) {
  if (status != "ok") return floor;
  if (std::any_of(flags.begin(), flags.end(),
                  [](const std::string& name) { return is_reject_flag(name); })) {
    return floor;
  }
  return std::isfinite(verdict_reward) ? verdict_reward : floor;
}

RewardSmoother::RewardSmoother(std::size_t window, double clip) : window_(window), clip_(clip) {
  if (window_ < 1) throw std::invalid_argument("the smoothing window must hold at least 1 reward");
  if (!(clip_ > 0)) throw std::invalid_argument("the reward clip must be positive");
}

WindowStats RewardSmoother::statistics(const std::string& task,
                                       const std::vector<double>& raws) const {
  std::vector<double> values = raws;
  if (const auto it = history_.find(task); it != history_.end())
    values.insert(values.end(), it->second.begin(), it->second.end());
  // Summed in value order, so that any permutation of a request gives the same bits.
  std::sort(values.begin(), values.end());
  return window_stats(values);
}

std::vector<double> RewardSmoother::score(const std::string& task,
                                          const std::vector<double>& raws) {
  const WindowStats stats = statistics(task, raws);
  std::vector<double> scores(raws.size(), 0.0);
  // Equal rewards (a lone first one included) carry no ranking information.
  if (!no_spread(stats.deviation, stats.mean)) {
    for (std::size_t i = 0; i < raws.size(); ++i)
      scores[i] = std::clamp((raws[i] - stats.mean) / stats.deviation, -clip_, clip_);
  }
  auto& values = history_[task];
  values.insert(values.end(), raws.begin(), raws.end());
  while (values.size() > window_) values.pop_front();
  return scores;
}

void RewardSmoother::restore(const std::string& task, const std::vector<double>& raws) {
  auto& values = history_[task];
  values.clear();
  const std::size_t skip = raws.size() > window_ ? raws.size() - window_ : 0;
  values.insert(values.end(), raws.begin() + static_cast<std::ptrdiff_t>(skip), raws.end());
}

WindowStats RewardSmoother::stats(const std::string& task) const {
  const auto it = history_.find(task);
  return it == history_.end() ? WindowStats{} : stats_of(it->second);
}

std::vector<std::optional<double>> group_advantages(
    const std::vector<double>& rewards, const std::vector<std::optional<std::string>>& groups,
    double epsilon) {
  if (rewards.size() != groups.size()) {
    throw std::invalid_argument("group_advantages: one group entry per reward is needed");
  }
  std::map<std::string, std::vector<std::size_t>> members;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    if (groups[i]) members[*groups[i]].push_back(i);
  }
  std::vector<std::optional<double>> advantages(rewards.size());
  for (const auto& [name, indices] : members) {
    // Summed in value order, so that a shuffled group gets the same advantages to the bit.
    std::vector<double> values;
    for (std::size_t i : indices) values.push_back(rewards[i]);
    std::sort(values.begin(), values.end());
    const double n = static_cast<double>(values.size());
    double sum = 0;
    for (double v : values) sum += v;
    const double mean = sum / n;
    double squares = 0;
    for (double v : values) squares += (v - mean) * (v - mean);
    const double deviation = values.size() > 1 ? std::sqrt(squares / (n - 1)) : 0.0;
    const double scale = deviation + epsilon;
    // Equal rewards (a group of one included) carry no preference: 0, also when epsilon is 0.
    const bool equal = no_spread(deviation, mean);
    for (std::size_t i : indices)
      advantages[i] = !equal && scale > 0 ? (rewards[i] - mean) / scale : 0.0;
  }
  return advantages;
}

}  // namespace cudal1::rl
