// The defenses as a list, and each one given measured numbers: which flag it raises, when, and
// what it records.
#include "cudal1/eval/defenses.hpp"

#include <gtest/gtest.h>

#include <set>

#include "cudal1/eval/flags.hpp"
#include "cudal1/eval/timing.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1 {
namespace defenses_test {

TEST(DefenseList, EveryFlagADefenseRaisesIsInTheFlagTable) {
  ASSERT_FALSE(defense_list().empty());
  for (const Defense& defense : defense_list()) {
    EXPECT_FALSE(defense.flags.empty()) << defense.name;
    for (std::string_view flag : defense.flags) {
      const FlagInfo* info = find_flag(flag);
      ASSERT_NE(info, nullptr) << defense.name << " raises " << flag
                               << ", which the flag table does not have";
      EXPECT_NE(info->effect, FlagEffect::kCorpusOnly)
          << flag << " is raised by " << defense.name << " but listed as corpus only";
    }
  }
}

TEST(DefenseList, NamesAreUniqueAndEachIsDescribed) {
  std::set<std::string_view> names;
  for (const Defense& defense : defense_list()) {
    EXPECT_TRUE(names.insert(defense.name).second) << defense.name;
    EXPECT_FALSE(defense.summary.empty()) << defense.name;
    EXPECT_NE(defense.run, nullptr) << defense.name;
  }
  for (const char* expected : {"task_inputs", "spot_checks", "unseen_inputs", "background_work",
                               "extra_streams", "no_custom_kernel", "speed_of_light"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
}

TEST(DefenseList, AsJsonForTheDocs) {
  const nlohmann::json list = defenses_to_json();
  ASSERT_EQ(list.size(), defense_list().size());
  for (const auto& entry : list) {
    for (const char* key : {"name", "phase", "flags", "summary"})
      EXPECT_TRUE(entry.contains(key)) << entry.dump();
  }
  const auto speed = std::find_if(list.begin(), list.end(), [](const nlohmann::json& e) {
    return e["name"] == "speed_of_light";
  });
  ASSERT_NE(speed, list.end());
  EXPECT_EQ((*speed)["phase"], "verdict");
  EXPECT_EQ((*speed)["flags"], nlohmann::json::array({"sub_physical_time"}));
}

// A context for one phase, with its own findings and details.
struct Phase {
  TimingConfig config;
  Findings findings;
  nlohmann::json details = nlohmann::json::object();
  DefenseContext context(DefensePhase phase) { return {phase, config, findings, details}; }
};

TEST(TaskInputsDefense, FlagsInputSetsTheCandidateMadeOtherwise) {
  Phase phase;
  const nlohmann::json reference = {{"inputs", "a"}, {"last_inputs", "b"}, {"unseen_inputs", "c"}};
  nlohmann::json candidate = reference;
  InputsMeasured same{reference, candidate, 4};
  auto context = phase.context(DefensePhase::kInputs);
  context.inputs = &same;
  run_defenses(context);
  EXPECT_TRUE(phase.findings.flags.empty());
  EXPECT_EQ(same.unseen_sets, 4u);

  candidate["unseen_inputs"] = "patched";
  InputsMeasured unlike{reference, candidate, 4};
  context.inputs = &unlike;
  run_defenses(context);
  EXPECT_TRUE(phase.findings.has(flag::kTampering));
  EXPECT_EQ(unlike.unseen_sets, 0u);
}

TEST(SpotCheckDefense, FlagsOutputsThatDiffer) {
  Phase phase;
  const wire::Message candidate{{{"v", 1}}, {}}, reference{{{"v", 2}}, {}};
  const OutputCheck differ = [](const wire::Message& c, const wire::Message& r) -> std::string {
    return c.header == r.header ? "" : "values differ";
  };
  const SpotCheckMeasured same{reference, reference, "timing sample 3", differ};
  auto context = phase.context(DefensePhase::kSpotCheck);
  context.spot_check = &same;
  run_defenses(context);
  EXPECT_TRUE(phase.findings.flags.empty());
  const SpotCheckMeasured stale{candidate, reference, "timing sample 4", differ};
  context.spot_check = &stale;
  run_defenses(context);
  ASSERT_TRUE(phase.findings.has(flag::kCachedOutput));
  EXPECT_EQ(phase.findings.evidence["cached_output"][0],
            "timing sample 4: outputs differ from the reference's for the same inputs although "
            "the trials matched: values differ");
}

TEST(ActivityDefenses, CountWhatTheCandidateDidBeyondTheReference) {
  Phase phase;
  const nlohmann::json reference = {{"kernels_outside_windows", 2},
                                    {"copies_outside_windows", 0},
                                    {"streams", {1, 5}},
                                    {"default_stream", 1}};
  nlohmann::json candidate = reference;
  ActivityMeasured measured{reference, candidate};
  auto context = phase.context(DefensePhase::kActivity);
  context.activity = &measured;
  run_defenses(context);
  EXPECT_TRUE(phase.findings.flags.empty());  // as much as the reference (the harness's own)

  candidate["copies_outside_windows"] = 1;
  run_defenses(context);
  EXPECT_TRUE(phase.findings.has(flag::kBackgroundWork));
  EXPECT_FALSE(phase.findings.has(flag::kExtraStreams));
  candidate["streams"] = {1, 5, 6};
  run_defenses(context);
  EXPECT_TRUE(phase.findings.has(flag::kExtraStreams));
  EXPECT_EQ(phase.findings.evidence["extra_streams"][0],
            "timing: the candidate used 2 stream(s) besides the default one (the timer waits for "
            "all of them)");
}

// The verdict phase's measurements around a joined timing.
struct VerdictPhase : Phase {
  VerdictPhase() { timing.details = nlohmann::json::object(); }
  TimingOutcome timing;
  std::vector<std::string> own_kernels;
  int bandwidth_measured = 0;
  std::optional<double> bandwidth_then;
  void run(std::optional<double> bandwidth, bool on_cpu = false, bool extension = false) {
    const VerdictMeasured measured{timing,
                                   0,
                                   bandwidth,
                                   [this] {
                                     ++bandwidth_measured;
                                     return bandwidth_then;
                                   },
                                   on_cpu,
                                   own_kernels,
                                   extension};
    auto context = this->context(DefensePhase::kVerdict);
    context.verdict = &measured;
    run_defenses(context);
  }
};

TEST(NoCustomKernelDefense, ReadsWhoseKernelsRan) {
  VerdictPhase none;
  none.timing.details = {{"activity", {{"candidate", {{"own_kernels", 0}}}}}};
  none.run(std::nullopt);
  ASSERT_TRUE(none.findings.has(flag::kNoCustomKernel));
  EXPECT_EQ(none.findings.evidence["no_custom_kernel"][0],
            "the candidate defines no kernel of its own");

  VerdictPhase idle;
  idle.own_kernels = {"fused", "tiled"};
  idle.timing.details = none.timing.details;
  idle.run(std::nullopt);
  EXPECT_EQ(idle.findings.evidence["no_custom_kernel"][0],
            "none of the candidate's kernels (fused, tiled) ran while it was timed");

  VerdictPhase ran;
  ran.timing.details = {{"activity", {{"candidate", {{"own_kernels", 1}}}}}};
  ran.run(std::nullopt);
  EXPECT_FALSE(ran.findings.has(flag::kNoCustomKernel));
}

TEST(NoCustomKernelDefense, OnTheCpuAnExtensionIsTheSign) {
  VerdictPhase plain;
  plain.run(std::nullopt, /*on_cpu=*/true, /*extension=*/false);
  EXPECT_EQ(plain.findings.evidence["no_custom_kernel"][0],
            "the candidate builds no C++/CUDA extension");
  VerdictPhase extension;
  extension.run(std::nullopt, true, true);
  EXPECT_FALSE(extension.findings.has(flag::kNoCustomKernel));
  VerdictPhase gpu_untraced;  // no trace on a GPU: nothing to go by
  gpu_untraced.run(std::nullopt, false, false);
  EXPECT_FALSE(gpu_untraced.findings.has(flag::kNoCustomKernel));
}

// 100 MB of inputs at 100 GB/s: a floor of 1 ms.
void set_times(VerdictPhase& phase, double reference_ms, double candidate_ms) {
  phase.timing.details = {{"input_set_bytes", 1e8},
                          {"activity", {{"candidate", {{"own_kernels", 1}}}}}};
  phase.timing.reference_ms.assign(50, reference_ms);
  phase.timing.candidate_ms.assign(50, candidate_ms);
}

TEST(SpeedOfLightDefense, FlagsCallsFasterThanMovingTheirBytes) {
  VerdictPhase phase;
  set_times(phase, 2.0, 0.1);
  phase.bandwidth_then = 50;  // measured again, lower: the first stands
  phase.run(100.0);
  EXPECT_TRUE(phase.findings.has(flag::kSubPhysicalTime));
  EXPECT_EQ(phase.bandwidth_measured, 1);
  const auto& record = phase.details.at("speed_of_light");
  EXPECT_DOUBLE_EQ(record.at("floor_ms").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(record.at("factor").get<double>(), 0.9);
  EXPECT_FALSE(record.contains("first_bandwidth_gbs"));
  EXPECT_FALSE(record.contains("applies"));
}

TEST(SpeedOfLightDefense, AHigherSecondMeasurementLowersTheFloor) {
  VerdictPhase phase;
  set_times(phase, 2.0, 0.1);
  phase.bandwidth_then = 1000;  // the floor becomes 0.1 ms: 0.1 ms is over 0.9 of it
  phase.run(100.0);
  EXPECT_FALSE(phase.findings.has(flag::kSubPhysicalTime));
  EXPECT_DOUBLE_EQ(phase.details["speed_of_light"]["first_bandwidth_gbs"].get<double>(), 100);
  EXPECT_DOUBLE_EQ(phase.details["speed_of_light"]["bandwidth_gbs"].get<double>(), 1000);
}

TEST(SpeedOfLightDefense, NoFloorWhereTheReferenceBeatsItOrNoBandwidthIsKnown) {
  VerdictPhase beaten;
  set_times(beaten, 0.5, 0.1);
  beaten.run(100.0);
  EXPECT_FALSE(beaten.findings.has(flag::kSubPhysicalTime));
  EXPECT_EQ(beaten.details["speed_of_light"]["applies"], false);
  EXPECT_EQ(beaten.bandwidth_measured, 0);

  VerdictPhase unknown;
  set_times(unknown, 2.0, 0.1);
  unknown.run(std::nullopt);
  EXPECT_FALSE(unknown.findings.has(flag::kSubPhysicalTime));
  EXPECT_FALSE(unknown.details.contains("speed_of_light"));

  VerdictPhase cpu;  // a wider margin on the CPU: 0.6 ms is over half the floor
  set_times(cpu, 2.0, 0.6);
  cpu.run(100.0, /*on_cpu=*/true, true);
  EXPECT_FALSE(cpu.findings.has(flag::kSubPhysicalTime));
  EXPECT_DOUBLE_EQ(cpu.details["speed_of_light"]["factor"].get<double>(), 0.5);
}

// Pairs after sampling, made up: the reference at 1 ms; the candidate at `fresh_ms` on values
// new to it and `seen_ms` on values it has seen.
class ScriptedPairs : public PairSource {
 public:
  ScriptedPairs(double fresh_ms, double seen_ms) : fresh_ms_(fresh_ms), seen_ms_(seen_ms) {}
  ExtraPair take_pair(bool on_unseen_set) override {
    ++taken;
    if (on_unseen_set) {
      ++next_unseen_;
      return {1.0, fresh_ms_, true, false};
    }
    return {1.0, seen_ms_, false, false};
  }
  std::size_t unseen_left() const override { return made_ - next_unseen_; }
  std::size_t unseen_made() const override { return made_; }
  bool unseen_hidden() const override { return true; }
  std::optional<std::size_t> more_unseen(std::size_t count) override {
    if (unlike) return std::nullopt;
    made_ += count;
    return count;
  }
  std::mt19937_64& schedule() override { return schedule_; }

  bool unlike = false;
  std::size_t taken = 0;

 private:
  double fresh_ms_, seen_ms_;
  std::size_t made_ = 4, next_unseen_ = 0;
  std::mt19937_64 schedule_{9};
};

struct SampledPhase : Phase {
  std::vector<double> reference_ms = std::vector<double>(30, 1.0);
  std::vector<double> candidate_ms;
  std::vector<bool> first_use = std::vector<bool>(30, false);
  void run(PairSource& pairs, bool spot_checks = true) {
    const SampledMeasured sampled{reference_ms, candidate_ms, first_use, spot_checks, pairs};
    auto context = this->context(DefensePhase::kSampled);
    context.sampled = &sampled;
    run_defenses(context);
  }
};

TEST(UnseenInputsDefense, AnHonestCandidateTakesOneLook) {
  SampledPhase phase;
  phase.candidate_ms.assign(30, 0.5);
  ScriptedPairs pairs(0.5, 0.5);
  phase.run(pairs);
  EXPECT_TRUE(phase.findings.flags.empty());
  EXPECT_EQ(pairs.taken, 4u);
  const auto& record = phase.details.at("unseen");
  EXPECT_EQ(record.at("pairs"), 4);
  EXPECT_EQ(record.at("seen_pairs"), 30);
  EXPECT_FALSE(record.contains("second_look"));
  EXPECT_DOUBLE_EQ(record.at("inflation").get<double>(), 1.0);
}

TEST(UnseenInputsDefense, ACacheByValuesIsConfirmedByASecondLook) {
  SampledPhase phase;
  phase.candidate_ms.assign(30, 0.05);
  ScriptedPairs pairs(0.5, 0.05);
  phase.run(pairs);
  ASSERT_TRUE(phase.findings.has(flag::kCachedOutput));
  const auto& record = phase.details.at("unseen");
  EXPECT_EQ(record.at("second_look").at("looks"), 1);
  EXPECT_EQ(record.at("second_look").at("unseen_pairs"), 4);
  EXPECT_EQ(record.at("second_look").at("seen_pairs"), 16);
  EXPECT_EQ(record.at("available"), 8);
  EXPECT_EQ(pairs.taken, 4u + 20u);
}

TEST(UnseenInputsDefense, UnseenSetsMadeUnlikeAreTampering) {
  SampledPhase phase;
  phase.candidate_ms.assign(30, 0.05);
  ScriptedPairs pairs(0.5, 0.05);
  pairs.unlike = true;
  phase.run(pairs);
  EXPECT_TRUE(phase.findings.has(flag::kTampering));
  // The second look had no pairs: no verdict on the cache.
  EXPECT_FALSE(phase.findings.has(flag::kCachedOutput));
  EXPECT_EQ(phase.details["unseen"]["skipped"], "no call on unseen input values to compare with");
}

TEST(UnseenInputsDefense, NeedsSpotChecksAndPairsOnSeenSets) {
  SampledPhase off;
  off.candidate_ms.assign(30, 0.05);
  ScriptedPairs pairs(0.5, 0.05);
  off.run(pairs, /*spot_checks=*/false);
  EXPECT_FALSE(off.details.contains("unseen"));
  EXPECT_EQ(pairs.taken, 0u);

  SampledPhase fresh;  // every sampled pair on its set's first use
  fresh.candidate_ms.assign(30, 0.05);
  fresh.first_use.assign(30, true);
  fresh.run(pairs);
  EXPECT_TRUE(fresh.details["unseen"].contains("skipped"));
  EXPECT_EQ(fresh.details["unseen"]["first_use_pairs"], 30);
  EXPECT_EQ(pairs.taken, 0u);
}

}  // namespace defenses_test
}  // namespace cudal1
