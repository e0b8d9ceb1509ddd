// The interval for what a rerun would measure: a prior for the offset a pair of processes
// carries, pooled with the spread the rounds show, and the rounds --timing-rounds auto asks for.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "cudal1/eval/timing.hpp"

namespace cudal1 {
namespace {

// One round as the engine sees it after measure_speedup: medians, a sampling interval of
// relative half-width `noise`, the clock, and kernels per call from the trace.
TimingOutcome round_at(double speedup, double reference_ms, double noise = 0.002,
                       double kernels = 1, const std::string& mode = "queued") {
  TimingOutcome r;
  r.reference_median_ms = reference_ms;
  r.candidate_median_ms = reference_ms / speedup;
  r.speedup = speedup;
  r.ci = {speedup * std::exp(-1.96 * noise), speedup * std::exp(1.96 * noise)};
  r.relative_noise = noise;
  r.converged = true;
  r.details = {{"mode", mode},
               {"activity",
                {{"reference", {{"kernels_per_call", kernels}}},
                 {"candidate", {{"kernels_per_call", kernels}}}}}};
  return r;
}

TEST(OutlyingRound, OneDisturbedRoundOfSixIsLeftOutAndNoneOfAnAgreeingSet) {
  const OffsetPrior prior;
  // CUDA-L1's 2/14 on an H100 (2026-11-27): five rounds at 3.23x to 3.47x, one at 2.16x.
  std::vector<TimingOutcome> rounds;
  for (double s : {3.226, 3.422, 3.455, 3.467, 3.308, 2.163})
    rounds.push_back(round_at(s, 0.02, 0.005, 5));
  EXPECT_EQ(outlying_round(rounds, prior, false), std::optional<std::size_t>(5));
  // The same far round where the speed is a per-process choice is the candidate's own.
  EXPECT_EQ(outlying_round(rounds, prior, true), std::nullopt);
  // Fewer than five rounds: no majority to judge by.
  rounds.erase(rounds.begin(), rounds.begin() + 2);
  EXPECT_EQ(outlying_round(rounds, prior, false), std::nullopt);
  // Six rounds spread as the prior says a pair of processes moves: none is left out.
  std::vector<TimingOutcome> agreeing;
  for (double s : {1.30, 1.33, 1.27, 1.35, 1.31, 1.25}) agreeing.push_back(round_at(s, 0.01));
  EXPECT_EQ(outlying_round(agreeing, prior, false), std::nullopt);
  // Rounds spread widely and evenly (no single one stands out): none either.
  std::vector<TimingOutcome> spread;
  for (double s : {1.0, 1.2, 1.4, 1.6, 1.8, 2.0}) spread.push_back(round_at(s, 0.01));
  EXPECT_EQ(outlying_round(spread, prior, false), std::nullopt);
}

TEST(RerunInterval, AMicrosecondCallCarriesItsProcessOffsetInOneRound) {
  const OffsetPrior prior;
  // CUDA-L1's 1/100: about 9 us against 7.5 us, two kernels a side.
  const TimingOutcome one = round_at(1.2, 0.009, 0.002, 2);
  const double expected_prior =
      std::sqrt(std::pow(prior.floor, 2) + std::pow(prior.per_kernel_us * 2 / 9.0, 2) +
                std::pow(prior.per_kernel_us * 2 / 7.5, 2));
  EXPECT_NEAR(prior_offset_sd(one, prior, false), expected_prior, 1e-12);
  const RerunInterval interval = rerun_interval({one}, prior, false);
  EXPECT_DOUBLE_EQ(interval.speedup, 1.2);
  EXPECT_EQ(interval.rounds, 1u);
  // 1.96 * sqrt(2 (tau^2 + w^2 + run^2)) on the log scale: several percent, where the samples
  // alone say 0.2 %.
  const double half =
      1.96 *
      std::sqrt(2 * (expected_prior * expected_prior + 0.002 * 0.002 + prior.run * prior.run));
  EXPECT_NEAR(interval.ci.low, 1.2 * std::exp(-half), 1e-9);
  EXPECT_NEAR(interval.ci.high, 1.2 * std::exp(half), 1e-9);
  EXPECT_GT(interval.half_width, 0.05);
  EXPECT_GT(more_rounds_wanted(interval, 1, RoundsPolicy{}), 0u);
}

TEST(RerunInterval, ALongCallIsDecidedByItsFirstRound) {
  const RerunInterval interval = rerun_interval({round_at(1.5, 2.0, 0.003, 12)}, {}, false);
  // Never narrower than what two evaluations differ by beyond their processes.
  EXPECT_GT(interval.half_width, 1.96 * std::sqrt(2.0) * OffsetPrior{}.run);
  EXPECT_LT(interval.half_width, RoundsPolicy{}.rerun_target);
  EXPECT_EQ(more_rounds_wanted(interval, 1, RoundsPolicy{}), 0u);
}

TEST(RerunInterval, ALibraryChoosingPerProcessAsksForASecondRound) {
  const TimingOutcome one = round_at(1.5, 2.0, 0.003, 12);
  EXPECT_GT(prior_offset_sd(one, {}, true), prior_offset_sd(one, {}, false));
  const RerunInterval first = rerun_interval({one}, {}, true);
  EXPECT_GT(more_rounds_wanted(first, 1, RoundsPolicy{}), 0u);
  // Two rounds that agree: settled.
  const RerunInterval two = rerun_interval({one, round_at(1.5, 2.0, 0.003, 12)}, {}, true);
  EXPECT_EQ(more_rounds_wanted(two, 2, RoundsPolicy{}), 0u);
}

TEST(RerunInterval, CuDnnKernelsOnEitherSideCountAsChosenPerProcess) {
  TimingOutcome r = round_at(1.1, 0.2);
  EXPECT_FALSE(runs_library_chosen_kernels(r));
  r.details["activity"]["reference"]["kernel_names"] = {
      "void cudnn::engines_precompiled::nchwToNhwcKernel<float>(...)", "elementwise_kernel"};
  EXPECT_TRUE(runs_library_chosen_kernels(r));
}

TEST(RerunInterval, TheWindowClockAndTheCpuGetTheHostsPrior) {
  const OffsetPrior prior;
  const TimingOutcome window = round_at(1.1, 5.0, 0.002, 1, "window");
  EXPECT_NEAR(prior_offset_sd(window, prior, false), std::hypot(prior.floor, prior.window), 1e-12);
}

TEST(RerunInterval, RoundsThatDisagreeWidenItPastThePrior) {
  const RerunInterval interval =
      rerun_interval({round_at(1.0, 0.5, 0.002, 4), round_at(1.1, 0.5, 0.002, 4)}, {}, false);
  EXPECT_GT(interval.between_sd, interval.prior_sd);
  EXPECT_LT(interval.ci.low, 1.0);
  EXPECT_GT(interval.ci.high, 1.1);
  EXPECT_NEAR(interval.speedup, std::sqrt(1.1), 1e-12);
}

TEST(RerunInterval, AgreeingRoundsNarrowItAsTheSquareRootOfTheirCount) {
  std::vector<TimingOutcome> rounds;
  for (int k = 0; k < 4; ++k) rounds.push_back(round_at(1.2, 0.009, 0.002, 2));
  const RerunInterval one = rerun_interval({rounds[0]}, {}, false);
  const RerunInterval four = rerun_interval(rounds, {}, false);
  // Rounds that agree exactly pull tau under the prior: (w tau0^2 + 0) / (w + 3).
  EXPECT_LT(four.between_sd, four.prior_sd);
  EXPECT_LT(four.half_width, 0.5 * one.half_width);
}

TEST(RerunInterval, MoreRoundsAreAskedForAsTheSquareOfHowFarTheWidthIsFromTheTarget) {
  RoundsPolicy policy;
  policy.rerun_target = 0.03;
  policy.max_rounds = 6;
  RerunInterval interval;
  interval.half_width = 0.06;  // twice the target after one round: four in all
  EXPECT_EQ(more_rounds_wanted(interval, 1, policy), 3u);
  interval.half_width = 0.031;
  EXPECT_EQ(more_rounds_wanted(interval, 2, policy), 1u);  // at least one
  interval.half_width = 0.5;
  EXPECT_EQ(more_rounds_wanted(interval, 2, policy), 4u);  // never past max_rounds
  EXPECT_EQ(more_rounds_wanted(interval, 6, policy), 0u);
  interval.half_width = 0.03;
  EXPECT_EQ(more_rounds_wanted(interval, 1, policy), 0u);
  interval.half_width = INFINITY;  // nothing measured
  EXPECT_EQ(more_rounds_wanted(interval, 1, policy), 0u);
}

// Candidates whose processes move as the prior expects: the adaptive rounds' interval from one
// evaluation holds a second, independent evaluation's speedup at least 90 % of the time.
TEST(RerunInterval, AnEvaluationsIntervalHoldsAReruns) {
  const RoundsPolicy policy;
  std::mt19937_64 rng(20261126);
  std::normal_distribution<double> unit(0.0, 1.0);
  const struct {
    double reference_ms, kernels, noise;
  } calls[] = {
      {0.009, 2, 0.004}, {0.016, 3, 0.003}, {0.05, 6, 0.002}, {0.3, 20, 0.002}, {2.0, 40, 0.002}};
  int checks = 0, held = 0;
  for (const auto& call : calls) {
    for (int trial = 0; trial < 400; ++trial) {
      const double truth = 1.3;
      const auto evaluate = [&]() {
        // What this evaluation shares with none other: the machine's state when it ran.
        const double run_offset = policy.prior.run * unit(rng);
        std::vector<TimingOutcome> rounds;
        for (std::size_t k = 0; k < policy.max_rounds; ++k) {
          const TimingOutcome shape = round_at(truth, call.reference_ms, call.noise, call.kernels);
          const double tau = prior_offset_sd(shape, policy.prior, false);
          const double measured =
              truth * std::exp(run_offset + tau * unit(rng) + call.noise / 1.96 * unit(rng));
          rounds.push_back(round_at(measured, call.reference_ms, call.noise, call.kernels));
          const RerunInterval so_far = rerun_interval(rounds, policy.prior, false);
          if (more_rounds_wanted(so_far, rounds.size(), policy) == 0) return so_far;
        }
        return rerun_interval(rounds, policy.prior, false);
      };
      const RerunInterval first = evaluate();
      const RerunInterval second = evaluate();
      ++checks;
      held += first.ci.low <= second.speedup && second.speedup <= first.ci.high;
    }
  }
  EXPECT_GE(static_cast<double>(held) / checks, 0.90) << held << " of " << checks;
}

}  // namespace
}  // namespace cudal1
