#include "cudal1/report/training_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace cudal1::report {
namespace {

// A step's key: the step itself, or the request for rewards given without one.
std::string group_key(const RewardEvent& e) {
  return e.step ? fmt::format("s{}", *e.step) : "r" + e.request_id;
}

std::string group_label(const RewardEvent& e) {
  return e.step ? fmt::format("step {}", *e.step) : "request " + e.request_id;
}

double fraction(std::size_t part, std::size_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

TrainingRun summarize_training(const std::vector<RewardEvent>& events, std::string source) {
  TrainingRun run;
  run.source = std::move(source);
  run.rewards = events.size();
  run.by_step = std::all_of(events.begin(), events.end(),
                            [](const RewardEvent& e) { return e.step.has_value(); });

  // Steps in the order their first reward was given.
  std::vector<std::vector<const RewardEvent*>> groups;
  std::map<std::string, std::size_t> index_of;
  for (const auto& e : events) {
    const auto [it, added] = index_of.try_emplace(group_key(e), groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(&e);
  }

  std::map<std::string, TaskProgress> tasks;
  std::map<std::string, std::pair<std::size_t, std::size_t>> task_statuses;  // (rejected, ok)
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& members = groups[g];
    TrainingStep step;
    step.label = group_label(*members.front());
    step.x = run.by_step ? static_cast<double>(*members.front()->step) : static_cast<double>(g + 1);
    step.rewards = members.size();
    std::vector<double> raw, smoothed;
    std::size_t rejected = 0, ok = 0;
    for (const RewardEvent* e : members) {
      raw.push_back(e->raw_reward);
      smoothed.push_back(e->reward);
      rejected += e->status == "rejected";
      ok += e->status == "ok";
      TaskProgress& task = tasks[e->task];
      task.task = e->task;
      ++task.rewards;
      task_statuses[e->task].first += e->status == "rejected";
      task_statuses[e->task].second += e->status == "ok";
      if (e->speedup && (!task.best_speedup || *e->speedup > *task.best_speedup)) {
        task.best_speedup = e->speedup;
        task.best_at = step.label;
        task.best_so_far.emplace_back(step.x, *e->speedup);
      }
    }
    step.raw = rl::window_stats(raw);
    step.smoothed = rl::window_stats(smoothed);
    step.rejected = fraction(rejected, members.size());
    step.ok = fraction(ok, members.size());
    run.steps.push_back(std::move(step));
  }
  for (auto& [key, task] : tasks) {
    task.rejected = fraction(task_statuses[key].first, task.rewards);
    task.ok = fraction(task_statuses[key].second, task.rewards);
    // One point per step: a step that raised the best twice keeps its last value.
    std::vector<std::pair<double, double>> points;
    for (const auto& point : task.best_so_far) {
      if (!points.empty() && points.back().first == point.first) {
        points.back().second = point.second;
      } else {
        points.push_back(point);
      }
    }
    task.best_so_far = std::move(points);
    run.tasks.push_back(std::move(task));
  }
  return run;
}

}  // namespace cudal1::report
