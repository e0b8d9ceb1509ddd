// The training view of a reward server's store: the rewards it gave a trainer, per step, and
// what they say about the policy. A rising fraction of rejected completions means the policy is
// probing the reward (trying hacks); the reward's mean and spread show learning and collapse;
// the best verified speedup per task shows what training has found so far.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/rl/reward_shaping.hpp"

namespace cudal1::report {

// One reward as given, in the order given.
struct RewardEvent {
  std::string task;
  std::optional<std::int64_t> step;  // the trainer's step, when its request named one
  std::string request_id;
  std::string status;  // the verdict's status
  double raw_reward = 0;
  double reward = 0;  // smoothed
  // The verified speedup: status ok, timed, no reject flag. None otherwise.
  std::optional<double> speedup;
};

// The rewards of one step; rewards without a step are grouped by the request that got them.
struct TrainingStep {
  std::string label;  // "step 12", or "request <id>"
  double x = 0;       // the step; the request's position (1, 2, ...) when some rewards have none
  std::size_t rewards = 0;
  rl::WindowStats raw;  // mean and population deviation of the step's rewards
  rl::WindowStats smoothed;
  double rejected = 0;  // fraction with status rejected
  double ok = 0;        // fraction with status ok
};

struct TaskProgress {
  std::string task;
  std::size_t rewards = 0;
  double rejected = 0;  // fractions over all of the task's rewards
  double ok = 0;
  std::optional<double> best_speedup;
  std::string best_at;  // the label of the step that first reached it
  // The best verified speedup after each step in which it changed: (x, speedup).
  std::vector<std::pair<double, double>> best_so_far;
};

struct TrainingRun {
  std::string source;  // the store it was read from
  std::size_t rewards = 0;
  bool by_step = true;              // every reward named its step (x is the step)
  std::vector<TrainingStep> steps;  // in the order their first reward was given
  std::vector<TaskProgress> tasks;  // by task key
};

// Groups and summarises `events` (in the order they were given).
TrainingRun summarize_training(const std::vector<RewardEvent>& events, std::string source);

}  // namespace cudal1::report
