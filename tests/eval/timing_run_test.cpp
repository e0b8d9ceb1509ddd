// TimingRun's phases against fake workers that answer at once: what each phase asks of the
// workers, the clock it chooses, when sampling stops, and which defenses flag what. The fake's
// times are made up, so what is asserted is counts, statuses and flags, never how fast anything
// ran.
#include "cudal1/eval/timing_run.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "cudal1/eval/verdict.hpp"
#include "fake_workers.hpp"

namespace cudal1 {
namespace timing_run_test {

using test_support::FakeWorkers;

// The window clock, no warm-up time to wait for, and a stop as soon as 20 pairs agree.
TimingConfig quick_config() {
  TimingConfig config;
  config.mode = "window";
  config.min_warmup_s = 0;
  config.noise.min_time_s = 0;
  config.noise.min_samples = 20;
  config.pool_size = 4;
  return config;
}

TimingOutcome run_all(FakeWorkers& workers, const TimingConfig& config,
                      const SpotCheck& check = FakeWorkers::output_check()) {
  return TimingRun(workers, config, 11, 12, nullptr, {}, check).run();
}

bool has_flag(const TimingOutcome& out, std::string_view flag) {
  return out.findings.has(flag);
}

TEST(TimingRun, MeasuresAnHonestCandidate) {
  FakeWorkers workers;
  const TimingConfig config = quick_config();
  const TimingOutcome out = run_all(workers, config);
  EXPECT_DOUBLE_EQ(out.speedup, 2.0);
  EXPECT_TRUE(out.converged);
  EXPECT_TRUE(out.findings.flags.empty()) << out.findings.evidence.dump();
  EXPECT_EQ(out.reference_ms.size(), 20u);
  EXPECT_EQ(out.details.at("pairs"), 20);
  EXPECT_EQ(out.details.at("stop"), "converged");
  EXPECT_EQ(out.details.at("mode"), "window");
  EXPECT_EQ(out.details.at("warmup_calls"), 3);
  EXPECT_EQ(out.details.at("input_sets"), 4);
  EXPECT_EQ(out.details.at("input_set_bytes"), 4096);
  // Spot checks during sampling, one after the last pair and one on each unseen pair.
  EXPECT_GE(out.details.at("spot_checks").get<std::size_t>(), 5u);
  // The unseen input values: four pairs, the candidate as fast on them as on the pool.
  const auto& unseen = out.details.at("unseen");
  EXPECT_EQ(unseen.at("pairs"), 4);
  EXPECT_EQ(unseen.at("first_use_pairs"), 1);  // set 3: warm-up called sets 0 to 2
  EXPECT_DOUBLE_EQ(unseen.at("speedup").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(unseen.at("inflation").get<double>(), 1.0);
  EXPECT_FALSE(unseen.contains("second_look"));
  // The requests: the pools first, the trace last (only the reference's, which keeps none).
  ASSERT_FALSE(workers.requests.empty());
  EXPECT_EQ(workers.requests.front()["request"]["op"], "prepare_timing");
  EXPECT_EQ(workers.requests.back()["request"]["op"], "activity");
  EXPECT_EQ(workers.of("activity").size(), 1u);
  EXPECT_TRUE(workers.of("more_unseen").empty());
}

TEST(TimingRun, PhasesOneAtATime) {
  FakeWorkers workers;
  const TimingConfig config = quick_config();
  TimingRun run(workers, config, 11, 12, nullptr, {}, FakeWorkers::output_check());
  run.prepare_pools();
  EXPECT_EQ(run.pool_sets(), 4u);
  EXPECT_EQ(run.unseen_sets(), 4u);
  ASSERT_EQ(workers.requests.size(), 1u);
  EXPECT_EQ(workers.requests[0]["request"], prepare_timing_request(config, 11));

  run.warm_up();
  EXPECT_EQ(run.clock_choice().mode, "window");
  // Three pairs, each side alone in its request, one input set each, in order.
  const auto warm = workers.of("sample");
  ASSERT_EQ(warm.size(), 6u);
  for (std::size_t i = 0; i < warm.size(); ++i) {
    EXPECT_EQ(warm[i]["sets"], nlohmann::json::array({i / 2}));
    EXPECT_EQ(warm[i]["mode"], "window");
  }

  run.sample();
  EXPECT_EQ(run.outcome().reference_ms.size(), 20u);
  EXPECT_FALSE(run.outcome().details.contains("unqueued_pairs_dropped"));
  const std::size_t sampled = workers.of("sample").size();

  run.final_checks();
  // The pair after the last, then four on unseen sets.
  const auto after = workers.of("sample");
  ASSERT_EQ(after.size(), sampled + 2 + 8);
  std::size_t on_unseen = 0;
  for (std::size_t i = sampled; i < after.size(); ++i) {
    EXPECT_TRUE(after[i].contains("check"));
    if (after[i]["sets"][0].is_object()) ++on_unseen;
  }
  EXPECT_EQ(on_unseen, 8u);

  run.summarise();
  EXPECT_TRUE(run.outcome().converged);
  EXPECT_DOUBLE_EQ(run.outcome().speedup, 2.0);
}

TEST(TimingRun, AfterAWarmUpUnderTheSharedHoldSetsGoOnFromWhereItStopped) {
  FakeWorkers workers;
  workers.pool = 16;
  TimingConfig config = quick_config();  // the window clock
  config.pool_size = 16;
  config.prewarmed_sets = 5;  // prewarm_timing took sets 0 to 4
  TimingRun run(workers, config, 11, 12, nullptr, {}, FakeWorkers::output_check());
  run.prepare_pools();
  run.warm_up();
  // On the window clock one pair is left to take, on the next set.
  const auto warm = workers.of("sample");
  ASSERT_EQ(warm.size(), 2u);
  for (const auto& request : warm) EXPECT_EQ(request["sets"], nlohmann::json::array({5}));
  run.sample();
  run.final_checks();
  run.summarise();
  // Sets 0 to 5 were called before sampling: the first uses in timing are sets 6 to 15.
  EXPECT_EQ(run.outcome().details.at("unseen").at("first_use_pairs"), 10);

  // On the queued clock's way (mode auto) the minimum of three pairs stays: the hold's time-out
  // is sized from a second call's host time.
  FakeWorkers gpu;
  gpu.pool = 16;
  gpu.queueable = true;
  config.mode = "auto";
  TimingRun queued(gpu, config, 11, 12, nullptr, {}, FakeWorkers::output_check());
  queued.prepare_pools();
  queued.warm_up();
  const auto pairs = gpu.of("sample");
  ASSERT_GE(pairs.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_EQ(pairs[i]["sets"], nlohmann::json::array({5 + i / 2}));
}

TEST(TimingRun, PreparePoolsFlagsInputsTheCandidateChanged) {
  FakeWorkers workers;
  workers.candidate_inputs = "patched";
  const TimingConfig config = quick_config();
  TimingRun run(workers, config, 11, 12, nullptr, {}, {});
  run.prepare_pools();
  EXPECT_TRUE(run.outcome().findings.has(flag::kTampering));
  EXPECT_EQ(run.unseen_sets(), 4u);  // the unseen sets themselves agree
}

TEST(TimingRun, PreparePoolsDropsUnseenSetsMadeUnlike) {
  FakeWorkers workers;
  workers.candidate_unseen_inputs = "patched";
  const TimingConfig config = quick_config();
  TimingRun run(workers, config, 11, 12, nullptr, {}, {});
  run.prepare_pools();
  EXPECT_TRUE(run.outcome().findings.has(flag::kTampering));
  EXPECT_EQ(run.unseen_sets(), 0u);
}

TEST(TimingRun, PreparePoolsUsesOneStreamWhenTheSidesDiffer) {
  FakeWorkers workers;
  workers.reference_streams = 2;
  TimingConfig config = quick_config();
  config.streams = 2;
  TimingRun run(workers, config, 11, 12, nullptr, {}, {});
  run.prepare_pools();
  const auto prepared = workers.of("prepare_timing");
  ASSERT_EQ(prepared.size(), 2u);
  EXPECT_EQ(prepared[0].at("streams"), 2);
  EXPECT_FALSE(prepared[1].contains("streams"));
  const auto& streams = run.outcome().details.at("streams");
  EXPECT_EQ(streams.at("asked"), 2);
  EXPECT_EQ(streams.at("reference"), 1);
  EXPECT_EQ(streams.at("candidate"), 1);
}

// Pools and warm-up on the "auto" clock (the queued clock is tried after the warm-up).
struct AutoWarmUp {
  static TimingConfig auto_config() {
    TimingConfig config = quick_config();
    config.mode = "auto";
    return config;
  }
  explicit AutoWarmUp(FakeWorkers& workers)
      : config(auto_config()), run(workers, config, 11, 12, nullptr, {}, {}) {
    run.prepare_pools();
    run.warm_up();
  }
  TimingConfig config;
  TimingRun run;
};

TEST(TimingRun, WarmUpTakesTheQueuedClockWhenEveryProbeIsHeld) {
  FakeWorkers workers;
  workers.queueable = true;
  AutoWarmUp warmed(workers);
  const TimingRun& run = warmed.run;
  EXPECT_EQ(run.clock_choice().mode, "queued");
  EXPECT_TRUE(run.clock_choice().reason.empty());
  // Ten times the slowest warm call's host time (1.1 ms), at least 50 ms.
  EXPECT_DOUBLE_EQ(run.clock_choice().hold_timeout_ms, 50);
  EXPECT_EQ(run.outcome().details.at("warmup_calls"), 3 + 2 * 3);
  EXPECT_EQ(run.outcome().details.at("hold_timeout_ms"), 50);
  EXPECT_FALSE(run.outcome().details.contains("queued_probe_retried"));
}

TEST(TimingRun, WarmUpStaysOnTheWindowClockWithoutADevice) {
  FakeWorkers workers;
  AutoWarmUp warmed(workers);
  const TimingRun& run = warmed.run;
  EXPECT_EQ(run.clock_choice().mode, "window");
  EXPECT_EQ(run.clock_choice().reason, "queued clock unavailable: the fake has no device");
  EXPECT_FALSE(run.clock_choice().missed_hold);
  EXPECT_FALSE(run.outcome().details.contains("missed_hold"));
  // The reference's probe said so: the candidate's was not asked for, nor a second try.
  EXPECT_EQ(run.outcome().details.at("warmup_calls"), 3 + 3);
  EXPECT_FALSE(run.outcome().details.contains("queued_probe_retried"));
}

TEST(TimingRun, WarmUpProbesAgainAfterACallLeftUnqueued) {
  FakeWorkers workers;
  workers.queueable = true;
  std::size_t candidate_probes = 0;
  workers.held = [&](const FakeWorkers::Call& call) {
    return call.side == Side::kReference || ++candidate_probes > 1;
  };
  AutoWarmUp warmed(workers);
  const TimingRun& run = warmed.run;
  EXPECT_EQ(run.clock_choice().mode, "queued");
  EXPECT_EQ(run.outcome().details.at("queued_probe_retried"), true);
  EXPECT_FALSE(run.clock_choice().missed_hold);
  // The second try waits four times as long for the calls to queue, and sampling keeps that.
  EXPECT_DOUBLE_EQ(run.clock_choice().hold_timeout_ms, 200);
  const auto samples = workers.of("sample", "candidate");
  ASSERT_FALSE(samples.empty());
  EXPECT_EQ(samples.back().at("hold_timeout_ms"), 200);
}

TEST(TimingRun, WarmUpSaysWhenTheWindowClockCameFromACallThatMissedTheHold) {
  FakeWorkers workers;
  workers.queueable = true;
  workers.held = [](const FakeWorkers::Call& call) { return call.side == Side::kCandidate; };
  AutoWarmUp warmed(workers);
  const TimingRun& run = warmed.run;
  EXPECT_EQ(run.clock_choice().mode, "window");
  EXPECT_TRUE(run.clock_choice().missed_hold);
  EXPECT_EQ(run.outcome().details.at("missed_hold"), true);
  EXPECT_NE(run.clock_choice().reason.find("within 200 ms"), std::string::npos)
      << run.clock_choice().reason;
}

TEST(TimingRun, SamplingRestartsOnTheWindowClockWhenCallsStopQueuing) {
  FakeWorkers workers;
  workers.queueable = true;
  // The candidate's calls stop being held from input set 12 on (sampling starts at set 6).
  workers.held = [](const FakeWorkers::Call& call) {
    return call.side == Side::kReference || !call.set || *call.set < 12;
  };
  TimingConfig config = quick_config();
  config.mode = "auto";
  const TimingOutcome out = run_all(workers, config);
  EXPECT_EQ(out.details.at("mode"), "window");
  EXPECT_NE(out.details.at("mode_reason").get<std::string>().find("restarted on the window clock"),
            std::string::npos);
  // Two pairs dropped as unqueued by chance, the third restarts sampling.
  EXPECT_EQ(out.details.at("unqueued_pairs_dropped"), 2);
  EXPECT_EQ(out.details.at("missed_hold"), true);
  EXPECT_TRUE(out.converged);
  EXPECT_EQ(out.reference_ms.size(), 20u);
}

TEST(TimingRun, ACandidateKeepingResultsByInputValuesIsFlagged) {
  FakeWorkers workers;
  workers.ms = [](const FakeWorkers::Call& call) {
    if (call.side == Side::kReference) return 1.0;
    return call.seen_before ? 0.05 : 0.5;
  };
  const TimingOutcome out = run_all(workers, quick_config());
  EXPECT_NEAR(out.speedup, 20.0, 1e-9);
  ASSERT_TRUE(has_flag(out, flag::kCachedOutput)) << out.details.at("unseen").dump();
  EXPECT_FALSE(has_flag(out, flag::kTampering));
  const auto& unseen = out.details.at("unseen");
  EXPECT_TRUE(unseen.contains("first_look"));
  EXPECT_EQ(unseen.at("second_look").at("looks"), 1);
  EXPECT_EQ(unseen.at("second_look").at("unseen_pairs"), 4);
  EXPECT_EQ(unseen.at("second_look").at("seen_pairs"), 16);
  EXPECT_NEAR(unseen.at("inflation").get<double>(), 10.0, 1e-9);
  EXPECT_EQ(unseen.at("available"), 8);  // four before timing, four for the second look
  EXPECT_EQ(workers.of("more_unseen").size(), 1u);
}

TEST(TimingRun, StaleOutputsInASpotCheckAreFlagged) {
  FakeWorkers workers;
  // From input set 6 on (sampling), the candidate returns the previous set's output.
  workers.output = [](const FakeWorkers::Call& call) -> std::size_t {
    if (call.unseen) return 1000 + *call.unseen;
    return call.side == Side::kCandidate && *call.set >= 6 ? *call.set - 1 : *call.set;
  };
  const TimingOutcome out = run_all(workers, quick_config());
  ASSERT_TRUE(has_flag(out, flag::kCachedOutput));
  const std::string why = out.findings.evidence.at("cached_output").at(0);
  EXPECT_EQ(why.rfind("timing sample ", 0), 0u) << why;
  EXPECT_NE(why.find("outputs differ from the reference's"), std::string::npos);
}

TEST(TimingRun, TheActivityDefensesReadBothTraces) {
  FakeWorkers workers;
  workers.reference_activity = {{"outside_kernels", 0}, {"streams", {7}}, {"default_stream", 7}};
  workers.candidate_activity = {
      {"outside_kernels", 3},
      {"outside_copies", 1},
      {"outside_before_harness", 2},
      {"outside_examples", {{"my_kernel", 885000, 575000, 20000}, {"", 1000, -2000}}},
      {"streams", {7, 9}},
      {"default_stream", 7},
      {"kernel_names", {"my_kernel"}}};
  TimingConfig config = quick_config();
  config.own_kernels = {"my_kernel"};
  const TimingOutcome out = run_all(workers, config);
  EXPECT_TRUE(has_flag(out, flag::kBackgroundWork));
  EXPECT_TRUE(has_flag(out, flag::kExtraStreams));
  EXPECT_EQ(out.findings.evidence.at("background_work").at(0),
            "timing: 4 kernels/copies of the candidate ran outside its timed calls (0 outside "
            "the reference's); 2 of them just before the harness's own work; first: my_kernel at "
            "+885 us from a window's start, +575 us from its end, 20 us before the harness's next "
            "work; a copy or memset at +1 us from a window's start, -2 us from its end");
  const auto& activity = out.details.at("activity");
  EXPECT_EQ(activity.at("candidate").at("own_kernels"), 1);
  EXPECT_EQ(activity.at("reference").at("own_kernels"), 0);
  EXPECT_EQ(workers.of("activity").size(), 2u);
}

TEST(TimingRun, TooFewPairsOnSeenSetsSkipTheUnseenCheck) {
  FakeWorkers workers;
  workers.pool = 64;  // every sampled pair is its set's first call
  const TimingOutcome out = run_all(workers, quick_config());
  const auto& unseen = out.details.at("unseen");
  EXPECT_NE(unseen.at("skipped").get<std::string>().find("pair(s) on pool sets"),
            std::string::npos);
  for (const auto& request : workers.of("sample")) EXPECT_FALSE(request["sets"][0].is_object());
}

TEST(TimingRun, WithoutSpotChecksNoOutputsReturnAndNoUnseenPairsAreTaken) {
  FakeWorkers workers;
  const TimingOutcome out = run_all(workers, quick_config(), {});
  EXPECT_EQ(out.details.at("spot_checks"), 0);
  EXPECT_FALSE(out.details.contains("unseen"));
  for (const auto& request : workers.of("sample")) EXPECT_FALSE(request.contains("check"));
}

TEST(TimingSide, ABatchTakesTheNextInputSets) {
  FakeWorkers workers;
  const TimingConfig config = quick_config();
  TimingSide side(workers, Side::kReference);
  ClockChoice window;
  EXPECT_NO_THROW(side.take_batch(config, window, Clock::now() + std::chrono::seconds(5), nullptr,
                                  {false, false}, std::nullopt, 0));
  EXPECT_EQ(side.next_set, 2u);
}

}  // namespace timing_run_test
}  // namespace cudal1
