// Joining timing rounds from fresh processes: the geometric mean of the rounds' speedups, an
// interval that holds the spread between rounds, and "noisy" unless the rounds agree.
#include <gtest/gtest.h>

#include <cmath>

#include "cudal1/eval/statistics.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/verdict.hpp"
#include "normal_samples.hpp"

namespace cudal1 {
namespace {

using test_support::normal_samples;

// One round as measure_speedup reports it: reference around ref_ms, candidate around cand_ms.
TimingOutcome round_of(double ref_ms, double cand_ms, std::uint64_t seed, std::size_t n = 200) {
  TimingOutcome r;
  r.reference_ms = normal_samples(ref_ms, ref_ms * 0.002, n, seed);
  r.candidate_ms = normal_samples(cand_ms, cand_ms * 0.002, n, seed + 1);
  r.reference_median_ms = median(r.reference_ms);
  r.candidate_median_ms = median(r.candidate_ms);
  r.speedup = r.reference_median_ms / r.candidate_median_ms;
  r.ci = bootstrap_median_ratio(r.reference_ms, r.candidate_ms, 500, 0.95, seed);
  r.relative_noise = relative_half_width(r.ci, r.speedup);
  r.converged = true;
  r.details = {{"mode", "queued"},
               {"stop", "converged"},
               {"elapsed_s", 1.0},
               {"spot_checks", 3},
               {"kernel_ms", {{"reference", ref_ms * 0.9}, {"candidate", cand_ms * 0.9}}},
               {"host_ms", {{"reference", ref_ms * 2}, {"candidate", cand_ms * 2}}}};
  return r;
}

TEST(TimingRounds, OneRoundIsReturnedAsItIs) {
  const TimingOutcome one = round_of(1.0, 0.5, 1);
  const TimingOutcome joined = combine_rounds({one}, 0.01, 500, 7);
  EXPECT_EQ(joined.speedup, one.speedup);
  EXPECT_EQ(joined.reference_ms, one.reference_ms);
  EXPECT_FALSE(joined.details.contains("rounds"));
}

TEST(TimingRounds, SpeedupIsTheGeometricMeanOfTheRounds) {
  // Per-process offsets: the same call at 1.00 and 1.04 ms, the candidate at 0.5 ms both times.
  const TimingOutcome joined =
      combine_rounds({round_of(1.00, 0.5, 1), round_of(1.04, 0.5, 3)}, 0.01, 500, 7);
  const auto& rounds = joined.details.at("rounds");
  ASSERT_EQ(rounds.size(), 2u);
  const double a = rounds[0].at("speedup").get<double>();
  const double b = rounds[1].at("speedup").get<double>();
  EXPECT_NEAR(joined.speedup, std::sqrt(a * b), 1e-12);
  EXPECT_NEAR(joined.speedup, joined.reference_median_ms / joined.candidate_median_ms, 1e-12);
  EXPECT_NEAR(joined.details.at("round_spread").get<double>(), std::abs(a - b) / (0.5 * (a + b)),
              1e-12);
  EXPECT_EQ(joined.reference_ms.size(), 400u);  // samples pooled
  EXPECT_EQ(joined.details.at("pairs").get<std::size_t>(), 400u);
  EXPECT_EQ(joined.details.at("spot_checks").get<std::size_t>(), 6u);
  EXPECT_NEAR(joined.details.at("kernel_time_speedup").get<double>(), std::sqrt(1.00 * 1.04) / 0.5,
              1e-9);
}

TEST(TimingRounds, IntervalHoldsTheSpreadBetweenRounds) {
  const TimingOutcome low = round_of(1.00, 0.5, 1);
  const TimingOutcome high = round_of(1.06, 0.5, 3);
  const TimingOutcome joined = combine_rounds({low, high}, 0.01, 1000, 7);
  // Each round alone is precise (0.2 % sample noise); the rounds differ by 6 %: the joint
  // interval must not claim the within-round precision. Two rounds say little about the spread
  // between processes, so it reaches past both.
  EXPECT_LT(joined.ci.low, low.speedup);
  EXPECT_GT(joined.ci.high, high.speedup);
  EXPECT_GT(joined.relative_noise, 5 * std::max(low.relative_noise, high.relative_noise));
  EXPECT_FALSE(joined.converged);
  EXPECT_EQ(joined.details.at("stop"), "rounds_disagree");
}

TEST(TimingRounds, AgreeingRoundsConverge) {
  const TimingOutcome joined = combine_rounds(
      {round_of(1.0, 0.5, 1), round_of(1.0, 0.5, 3), round_of(1.0, 0.5, 5)}, 0.01, 1000, 7);
  EXPECT_TRUE(joined.converged);
  EXPECT_EQ(joined.details.at("stop"), "converged");
  EXPECT_NEAR(joined.speedup, 2.0, 0.01);
  EXPECT_LT(joined.ci.low, 2.0);
  EXPECT_GT(joined.ci.high, 2.0);
}

TEST(TimingRounds, ARoundWithTooFewPairsMakesTheResultNoisy) {
  TimingOutcome short_round = round_of(1.0, 0.5, 3, 12);
  short_round.converged = false;
  short_round.details["stop"] = "time_budget";
  const TimingOutcome joined = combine_rounds({round_of(1.0, 0.5, 1), short_round}, 0.01, 500, 7);
  EXPECT_FALSE(joined.converged);
  EXPECT_EQ(joined.details.at("stop"), "time_budget");
  EXPECT_EQ(joined.details.at("short_round"), "round 2: time_budget");
}

TEST(TimingRounds, RoundsThatStoppedShortOfTheirOwnTargetCanStillConvergeTogether) {
  // Eight short rounds, each with its own 1 % target missed (sample noise 2 %, 40 pairs), and no
  // offset between them: the joint interval over 320 pairs meets the target.
  std::vector<TimingOutcome> rounds;
  for (std::uint64_t k = 0; k < 8; ++k) {
    TimingOutcome r;
    r.reference_ms = normal_samples(1.0, 0.02, 40, 11 + 2 * k);
    r.candidate_ms = normal_samples(0.5, 0.01, 40, 12 + 2 * k);
    r.reference_median_ms = median(r.reference_ms);
    r.candidate_median_ms = median(r.candidate_ms);
    r.speedup = r.reference_median_ms / r.candidate_median_ms;
    r.converged = false;
    r.details = {{"mode", "queued"}, {"stop", "time_budget"}, {"criterion", {{"min_samples", 20}}}};
    rounds.push_back(std::move(r));
  }
  const TimingOutcome joined = combine_rounds(std::move(rounds), 0.01, 1000, 7);
  EXPECT_LE(joined.relative_noise, 0.01);
  EXPECT_TRUE(joined.converged);
  EXPECT_EQ(joined.details.at("stop"), "converged");
}

TEST(TimingRounds, FindingsOfEveryRoundAreKept) {
  TimingOutcome first = round_of(1.0, 0.5, 1);
  TimingOutcome second = round_of(1.0, 0.5, 3);
  second.findings.add(flag::kCachedOutput, "round 2: outputs differ");
  const TimingOutcome joined = combine_rounds({first, second}, 0.01, 500, 7);
  EXPECT_TRUE(joined.findings.has(flag::kCachedOutput));
}

TEST(TimingRounds, EachRoundSaysWhatItsTracesPutOutsideTheTimedCalls) {
  TimingOutcome first = round_of(1.0, 0.5, 1);
  TimingOutcome second = round_of(1.0, 0.5, 3);
  second.details["activity"] = {{"reference", {{"kernels_outside_windows", 0}}},
                                {"candidate",
                                 {{"kernels_outside_windows", 30},
                                  {"outside_at_window_end", 6},
                                  {"outside_overshoot_ns", 151000}}}};
  const TimingOutcome joined = combine_rounds({first, second}, 0.01, 500, 7);
  const auto& rounds = joined.details.at("rounds");
  EXPECT_FALSE(rounds.at(0).contains("outside"));
  const auto& outside = rounds.at(1).at("outside");
  EXPECT_EQ(outside.at("candidate").at("kernels"), 30);
  EXPECT_EQ(outside.at("candidate").at("at_window_end"), 6);
  EXPECT_EQ(outside.at("candidate").at("overshoot_ns"), 151000);
  EXPECT_EQ(outside.at("reference").at("kernels"), 0);
}

TEST(TimingRounds, ASideWithoutKernelTimesInSomeRoundHasNoJointKernelTime) {
  TimingOutcome second = round_of(1.0, 0.5, 3);
  second.details.erase("kernel_ms");
  const TimingOutcome joined = combine_rounds({round_of(1.0, 0.5, 1), second}, 0.01, 500, 7);
  EXPECT_FALSE(joined.details.contains("kernel_ms"));
  EXPECT_TRUE(joined.details.contains("host_ms"));
}

TEST(TimingRounds, OnlyWindowRoundsAreJoinedWhenTheClocksDiffer) {
  TimingOutcome window = round_of(1.0, 0.25, 5);
  window.details["mode"] = "window";
  const TimingOutcome joined =
      combine_rounds({round_of(1.0, 0.5, 1), round_of(1.0, 0.5, 3), window}, 0.01, 500, 7);
  EXPECT_EQ(joined.speedup, window.speedup);
  EXPECT_EQ(joined.details.at("mode"), "window");
  EXPECT_EQ(joined.details.at("rounds_dropped").get<std::size_t>(), 2u);
}

// A round on the window clock: by choice (a side cannot be queued) or because a call missed the
// hold on a busy host.
TimingOutcome window_round(bool missed_hold, std::uint64_t seed) {
  TimingOutcome round = round_of(1.0, 0.4, seed);
  round.details["mode"] = "window";
  if (missed_hold) round.details["missed_hold"] = true;
  return round;
}

TEST(TimingRounds, ARoundThatMissedTheHoldOnceIsReplacedByTheQueuedRounds) {
  const std::vector<TimingOutcome> rounds = {window_round(true, 1), round_of(1.0, 0.5, 3),
                                             round_of(1.0, 0.5, 5)};
  EXPECT_TRUE(missed_the_hold(rounds[0]));
  EXPECT_FALSE(missed_the_hold(rounds[1]));
  EXPECT_TRUE(missed_rounds_by_chance(rounds));
  EXPECT_EQ(missed_rounds_replaced(rounds), std::vector<std::size_t>{0});
  // One object per round left out, as timing.rerun.missed_hold_left_out lists them.
  nlohmann::json left_out = nlohmann::json::array();
  left_out.insert(left_out.begin(), missed_round_record(0, rounds[0]));
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_EQ(left_out[0].at("round"), 1);
  EXPECT_DOUBLE_EQ(left_out[0].at("speedup").get<double>(), rounds[0].speedup);
  // Before a queued round exists, none replaces it: later rounds try the queued clock again.
  EXPECT_TRUE(missed_rounds_by_chance({rounds[0]}));
  EXPECT_TRUE(missed_rounds_replaced({rounds[0]}).empty());
}

TEST(TimingRounds, WindowRoundsByChoiceOrMissingTheHoldTwiceAreNotReplaced) {
  const TimingOutcome queued = round_of(1.0, 0.5, 3);
  // A side that cannot be queued: every round on the window clock, joined there.
  const std::vector<TimingOutcome> chosen = {window_round(false, 1), queued};
  EXPECT_FALSE(missed_rounds_by_chance(chosen));
  EXPECT_TRUE(missed_rounds_replaced(chosen).empty());
  // Missing it in two rounds is no longer chance.
  const std::vector<TimingOutcome> twice = {window_round(true, 1), queued, window_round(true, 7)};
  EXPECT_FALSE(missed_rounds_by_chance(twice));
  EXPECT_TRUE(missed_rounds_replaced(twice).empty());
  // A detail left from a queued round says nothing.
  TimingOutcome marked = queued;
  marked.details["missed_hold"] = true;
  EXPECT_FALSE(missed_the_hold(marked));
}

TEST(Statistics, RoundsBootstrapIsDeterministicAndEmptyRoundsGiveNoInterval) {
  const auto a = normal_samples(1.0, 0.01, 50, 1), b = normal_samples(0.5, 0.01, 50, 2);
  const std::vector<RoundSamples> rounds = {{a, b}, {b, a}};
  const Interval x = bootstrap_rounds_ratio(rounds, 200, 0.95, 9);
  const Interval y = bootstrap_rounds_ratio(rounds, 200, 0.95, 9);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
  EXPECT_NEAR(geometric_mean_ratio(rounds), 1.0, 1e-12);
  const std::vector<double> none;
  const std::vector<RoundSamples> broken = {{a, none}};
  EXPECT_TRUE(std::isnan(bootstrap_rounds_ratio(broken, 200, 0.95, 9).low));
}

TEST(TimingRounds, PairsAreStagedAsFarAsHalfTheFreeMemoryHolds) {
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_EQ(pairs_to_stage(1, 100 * gib, gib), 0u);      // one round: nothing to stage
  EXPECT_EQ(pairs_to_stage(8, 100 * gib, 3 * gib), 7u);  // all later rounds fit
  EXPECT_EQ(pairs_to_stage(8, 20 * gib, 3 * gib), 3u);   // 10 GiB to use: three pairs
  EXPECT_EQ(pairs_to_stage(8, 5 * gib, 3 * gib), 0u);    // not one: every round restarts
  EXPECT_EQ(pairs_to_stage(8, 100 * gib, 0), 0u);        // footprint unknown
  EXPECT_EQ(pairs_to_stage(8, -2 * gib, gib), 0u);       // estimate below zero
}

TEST(SpotChecks, LargeOutputsAreCheckedLessOftenSoChecksKeepTheirShareOfTheTime) {
  // Small outputs: a check costs about a pair, so every 8th pair as configured.
  EXPECT_EQ(spot_check_mean_gap(0.008, 0.004, 8, 0.25), 8u);
  // 32 MB outputs: 0.25 s a check against 4 ms a pair; 3 parts plain to 1 part checks.
  EXPECT_EQ(spot_check_mean_gap(0.25, 0.004, 8, 0.25), 188u);
  // Checks share half of the time: one check's cost in plain pairs.
  EXPECT_EQ(spot_check_mean_gap(0.25, 0.004, 8, 0.5), 63u);
  // No plain pair yet to compare with, or nonsense settings: the configured spacing, at least 1.
  EXPECT_EQ(spot_check_mean_gap(0.25, 0, 8, 0.25), 8u);
  EXPECT_EQ(spot_check_mean_gap(0.25, 0.004, 0, 2.0), 1u);
  EXPECT_EQ(spot_check_mean_gap(1e9, 1e-9, 8, 0.25), 1000000u);
}

std::vector<double> around(double ms, std::size_t n, std::uint64_t seed, double spread = 0.02) {
  return normal_samples(ms, ms * spread, n, seed);
}

TEST(UnseenInputs, AGainOnlyOnInputsSeenBeforeTripsTheLimit) {
  // Calls that do the work: the same speedup (3x) on seen sets and on unseen values.
  const auto honest = compare_unseen(around(2.0, 200, 1), around(0.667, 200, 2), around(2.0, 4, 3),
                                     around(0.667, 4, 4), 1.5);
  EXPECT_NEAR(honest.inflation, 1.0, 0.05);
  EXPECT_NEAR(honest.seen_speedup, 3.0, 0.05);
  EXPECT_LE(honest.inflation_low, honest.inflation);
  EXPECT_FALSE(honest.tripped);
  // Results kept by content: 9x on seen sets, as slow as the reference on values never seen.
  const auto cache = compare_unseen(around(2.3, 200, 5), around(0.25, 200, 6), around(2.3, 4, 7),
                                    around(2.4, 4, 8), 2.0);
  EXPECT_NEAR(cache.seen_speedup, 9.2, 0.5);
  EXPECT_NEAR(cache.speedup, 2.3 / 2.4, 0.05);
  EXPECT_GT(cache.inflation_low, 8.0);
  EXPECT_TRUE(cache.tripped);
  // Slower than the reference everywhere is not a cache.
  EXPECT_FALSE(
      compare_unseen(around(1, 50, 10), around(2, 50, 11), around(1, 4, 12), around(2, 4, 13), 1.5)
          .tripped);
  // Nothing measured, or zero times: no verdict either way.
  EXPECT_FALSE(compare_unseen({}, {}, {}, {}, 1.5).tripped);
  EXPECT_FALSE(compare_unseen(around(1, 50, 14), around(0.1, 50, 15), {1.0}, {0.0}, 1.5).tripped);
}

TEST(UnseenInputs, ACacheOnALoadedMachineIsStillNamed) {
  // What a fresh-clone make test gave content_keyed_compute (22x rewarded before this test):
  // the reference's calls preempted anywhere from 1.2 to 20 ms, the candidate's hits 0.19 to
  // 0.28 ms on seen sets, its misses 10 ms on unseen values (also preempted).
  std::vector<double> seen_ref, seen_cand, unseen_ref, unseen_cand;
  for (int i = 0; i < 126; ++i) {
    seen_ref.push_back(1.2 + 18.8 * ((i * 37) % 126) / 126.0);
    seen_cand.push_back(0.19 + 0.09 * ((i * 53) % 126) / 126.0);
  }
  for (int i = 0; i < 15; ++i) {
    unseen_ref.push_back(1.2 + 18.8 * ((i * 7) % 15) / 15.0);
    unseen_cand.push_back(2.0 + 12.0 * ((i * 11) % 15) / 15.0);
  }
  const auto loaded = compare_unseen(seen_ref, seen_cand, unseen_ref, unseen_cand, 2.0);
  EXPECT_GT(loaded.inflation, 10.0);
  EXPECT_GT(loaded.inflation_low, 2.0);
  EXPECT_TRUE(loaded.tripped);
}

TEST(UnseenInputs, ABurstOfLoadOnAFewSeenPairsDoesNotTrip) {
  // What a loaded 2-core CI machine gave an honest candidate (the task's own model): 11 pairs on
  // seen sets, six of them with the reference's call preempted; on unseen values the ratio
  // stays about 1.2. The point estimate is far over the limit; the interval's low end is not.
  const std::vector<double> seen_ref = {0.57, 0.68, 0.75, 4.9, 5.1, 6.2,
                                        11.4, 0.72, 4.96, 5.3, 3.9};
  const std::vector<double> seen_cand = {0.47, 0.52, 0.58, 0.55, 0.61, 0.49,
                                         0.57, 0.6,  0.53, 0.5,  0.66};
  std::vector<double> unseen_ref, unseen_cand;
  for (int i = 0; i < 20; ++i) {
    unseen_ref.push_back(0.69 + 0.01 * (i % 7));
    unseen_cand.push_back(0.55 + 0.01 * (i % 5));
  }
  const auto burst = compare_unseen(seen_ref, seen_cand, unseen_ref, unseen_cand, 2.0);
  EXPECT_GT(burst.inflation, 2.0);
  EXPECT_LT(burst.inflation_low, 2.0);
  EXPECT_FALSE(burst.tripped);
  // Too few pairs on seen sets: never a verdict of caching.
  const auto few = compare_unseen({9.0, 9.0, 9.0, 9.0}, {1.0, 1.0, 1.0, 1.0}, around(1, 8, 16),
                                  around(1, 8, 17), 1.5);
  EXPECT_GT(few.inflation_low, 1.5);
  EXPECT_FALSE(few.tripped);
  // Too few pairs for an interval at all.
  const auto tiny = compare_unseen(around(9, 5, 18), around(1, 5, 19), {1.0}, {1.0}, 1.5);
  EXPECT_GT(tiny.inflation, 5.0);
  EXPECT_EQ(tiny.inflation_low, 0.0);
  EXPECT_FALSE(tiny.tripped);
}

}  // namespace
}  // namespace cudal1
