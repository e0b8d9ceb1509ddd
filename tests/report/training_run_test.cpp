// The training view's numbers: rewards grouped by step (or by request when a step is missing),
// their mean and spread, the fractions rejected and verified, the best speedup per task so far.
#include "cudal1/report/training_run.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace cudal1::report {
namespace {

RewardEvent event(std::string task, std::optional<std::int64_t> step, std::string status,
                  double raw, double smoothed, std::optional<double> speedup = std::nullopt,
                  std::string request = "r") {
  return {std::move(task), step, std::move(request), std::move(status), raw, smoothed, speedup};
}

TEST(TrainingRun, StepsHoldMeanSpreadAndFractions) {
  const std::vector<RewardEvent> events = {
      event("level1/1_A", 1, "ok", 1.5, 1.0, 1.52),   event("level1/1_A", 1, "rejected", 0.0, -1.0),
      event("level1/2_B", 1, "incorrect", 0.0, -1.0), event("level1/2_B", 1, "ok", 2.5, 1.0, 2.5),
      event("level1/1_A", 2, "ok", 1.2, 0.5, 1.2),    event("level1/1_A", 2, "ok", 1.8, 1.5, 1.83),
  };
  const TrainingRun run = summarize_training(events, "serve.db");
  EXPECT_EQ(run.source, "serve.db");
  EXPECT_EQ(run.rewards, 6u);
  EXPECT_TRUE(run.by_step);
  ASSERT_EQ(run.steps.size(), 2u);
  const TrainingStep& first = run.steps[0];
  EXPECT_EQ(first.label, "step 1");
  EXPECT_EQ(first.x, 1.0);
  EXPECT_EQ(first.rewards, 4u);
  EXPECT_DOUBLE_EQ(first.raw.mean, 1.0);
  // Population deviation of {1.5, 0, 0, 2.5} around 1: sqrt((0.25 + 1 + 1 + 2.25) / 4).
  EXPECT_DOUBLE_EQ(first.raw.deviation, std::sqrt(4.5 / 4));
  EXPECT_DOUBLE_EQ(first.smoothed.mean, 0.0);
  EXPECT_DOUBLE_EQ(first.smoothed.deviation, 1.0);
  EXPECT_DOUBLE_EQ(first.rejected, 0.25);
  EXPECT_DOUBLE_EQ(first.ok, 0.5);
  const TrainingStep& second = run.steps[1];
  EXPECT_DOUBLE_EQ(second.raw.mean, 1.5);
  EXPECT_DOUBLE_EQ(second.raw.deviation, 0.3);
  EXPECT_DOUBLE_EQ(second.rejected, 0.0);
  EXPECT_DOUBLE_EQ(second.ok, 1.0);
}

TEST(TrainingRun, BestSpeedupPerTaskSoFar) {
  const std::vector<RewardEvent> events = {
      event("level1/1_A", 0, "ok", 1.1, 0, 1.1),  event("level1/1_A", 0, "ok", 1.3, 0, 1.3),
      event("level1/1_A", 1, "ok", 1.2, 0, 1.2),  event("level1/2_B", 1, "rejected", 0, 0),
      event("level1/1_A", 2, "ok", 1.9, 0, 1.95), event("level1/2_B", 2, "incorrect", 0, 0),
  };
  const TrainingRun run = summarize_training(events, "db");
  ASSERT_EQ(run.tasks.size(), 2u);
  const TaskProgress& a = run.tasks[0];
  EXPECT_EQ(a.task, "level1/1_A");
  EXPECT_EQ(a.rewards, 4u);
  EXPECT_EQ(a.best_speedup, 1.95);
  EXPECT_EQ(a.best_at, "step 2");
  // One point per step that raised the best; step 0 raised it twice and keeps the higher.
  ASSERT_EQ(a.best_so_far.size(), 2u);
  EXPECT_EQ(a.best_so_far[0], (std::pair<double, double>{0.0, 1.3}));
  EXPECT_EQ(a.best_so_far[1], (std::pair<double, double>{2.0, 1.95}));
  EXPECT_DOUBLE_EQ(a.ok, 1.0);
  const TaskProgress& b = run.tasks[1];
  EXPECT_EQ(b.best_speedup, std::nullopt);
  EXPECT_TRUE(b.best_so_far.empty());
  EXPECT_DOUBLE_EQ(b.rejected, 0.5);
  EXPECT_DOUBLE_EQ(b.ok, 0.0);
}

TEST(TrainingRun, RewardsWithoutAStepAreGroupedByRequest) {
  const std::vector<RewardEvent> events = {
      event("t", std::nullopt, "ok", 1.0, 0, 1.0, "req-b"),
      event("t", std::nullopt, "ok", 3.0, 0, 3.0, "req-a"),
      event("t", 5, "ok", 2.0, 0, 2.0, "req-c"),
      event("t", std::nullopt, "ok", 5.0, 0, 5.0, "req-b"),
  };
  const TrainingRun run = summarize_training(events, "db");
  EXPECT_FALSE(run.by_step);
  ASSERT_EQ(run.steps.size(), 3u);
  // In the order their first reward was given, numbered from 1.
  EXPECT_EQ(run.steps[0].label, "request req-b");
  EXPECT_EQ(run.steps[0].x, 1.0);
  EXPECT_EQ(run.steps[0].rewards, 2u);
  EXPECT_DOUBLE_EQ(run.steps[0].raw.mean, 3.0);
  EXPECT_EQ(run.steps[1].label, "request req-a");
  EXPECT_EQ(run.steps[2].label, "step 5");
  EXPECT_EQ(run.steps[2].x, 3.0);
}

TEST(TrainingRun, NoRewardsNoSteps) {
  const TrainingRun run = summarize_training({}, "empty.db");
  EXPECT_EQ(run.rewards, 0u);
  EXPECT_TRUE(run.steps.empty());
  EXPECT_TRUE(run.tasks.empty());
}

}  // namespace
}  // namespace cudal1::report
