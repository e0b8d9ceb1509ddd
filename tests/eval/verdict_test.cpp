#include "cudal1/eval/verdict.hpp"

#include <gtest/gtest.h>

#include <set>

#include "cudal1/eval/seeds.hpp"
#include "cudal1/eval/verdict_text.hpp"

namespace cudal1 {
namespace {

Verdict timed_ok() {
  Verdict v;
  v.status = Status::kOk;
  v.correct = true;
  v.speedup = 1.876;
  v.speedup_ci = Interval{1.85, 1.9};
  v.reference_ms = 2.0;
  v.candidate_ms = 1.066;
  v.samples = 120;
  v.max_abs_error = 1e-6;
  v.max_rel_error = 2e-6;
  return v;
}

TEST(Verdict, SchemaHasEveryContractField) {
  Verdict v = timed_ok();
  v.finalize();
  const auto json = v.to_json();
  for (const char* field : {"status", "correct", "speedup", "speedup_ci", "reward", "reference_ms",
                            "candidate_ms", "samples", "max_abs_error", "max_rel_error", "flags",
                            "task_flags", "seeds", "device", "log"}) {
    EXPECT_TRUE(json.contains(field)) << field;
  }
  EXPECT_EQ(json["status"], "ok");
  // The lower end of the interval [1.85, 1.9], not the point estimate 1.876.
  EXPECT_DOUBLE_EQ(json["reward"].get<double>(), 1.85);
  EXPECT_EQ(json["speedup_ci"].size(), 2u);
}

TEST(Verdict, NullsForWhatWasNotMeasured) {
  Verdict v;
  v.status = Status::kCompileError;
  v.finalize();
  const auto json = v.to_json();
  EXPECT_TRUE(json["speedup"].is_null());
  EXPECT_TRUE(json["speedup_ci"].is_null());
  EXPECT_EQ(json["reward"], 0.0);
  EXPECT_EQ(json["status"], "compile_error");
}

TEST(FlagTable, EveryNamedFlagIsInTheTableOnce) {
  for (auto name :
       {flag::kLazyOutput, flag::kOutputAliasesInput, flag::kReusedOutput, flag::kInputMutation,
        flag::kCachedOutput, flag::kTampering, flag::kBackgroundWork, flag::kSubPhysicalTime,
        flag::kTrivialOutput, flag::kTaskOverride, flag::kExtraStreams, flag::kPrecisionDowncast,
        flag::kNoCustomKernel, flag::kNoisy, flag::kReviewRejected, flag::kReviewUncertain,
        flag::kUnreviewed, flag::kDegenerate}) {
    const FlagInfo* info = find_flag(name);
    ASSERT_NE(info, nullptr) << name;
    EXPECT_FALSE(info->description.empty()) << name;
  }
  std::set<std::string_view> seen, reject;
  for (const FlagInfo& f : flag_table()) {
    EXPECT_TRUE(seen.insert(f.name).second) << f.name << " twice";
    if (f.effect == FlagEffect::kReject) reject.insert(f.name);
  }
  EXPECT_EQ(reject, (std::set<std::string_view>{"lazy_output", "output_aliases_input",
                                                "reused_output", "input_mutation", "cached_output",
                                                "tampering", "background_work", "sub_physical_time",
                                                "trivial_output", "review_rejected"}));
  EXPECT_FALSE(is_reject_flag("noisy"));
  EXPECT_FALSE(is_reject_flag("no_such_flag"));
  EXPECT_EQ(find_flag("no_such_flag"), nullptr);
}

TEST(Verdict, RejectFlagsForceRejectedAndZeroReward) {
  for (auto flag_name : {flag::kLazyOutput, flag::kCachedOutput, flag::kTampering,
                         flag::kTrivialOutput, flag::kSubPhysicalTime, flag::kBackgroundWork,
                         flag::kInputMutation, flag::kOutputAliasesInput, flag::kReusedOutput}) {
    Verdict v = timed_ok();
    v.add_flag(flag_name);
    v.finalize();
    EXPECT_EQ(v.status, Status::kRejected) << flag_name;
    EXPECT_EQ(v.reward, 0.0);
  }
}

TEST(Verdict, InformationalFlagsDoNotReject) {
  for (auto flag_name : {flag::kNoisy, flag::kTaskOverride, flag::kExtraStreams,
                         flag::kPrecisionDowncast, flag::kNoCustomKernel}) {
    Verdict v = timed_ok();
    v.add_flag(flag_name);
    v.finalize();
    EXPECT_EQ(v.status, Status::kOk) << flag_name;
  }
}

TEST(Verdict, FlagsAreNotDuplicated) {
  Verdict v;
  v.add_flag(flag::kNoisy);
  v.add_flag(flag::kNoisy);
  EXPECT_EQ(v.flags.size(), 1u);
}

TEST(Verdict, JsonRoundTrip) {
  Verdict v = timed_ok();
  v.add_flag(flag::kNoisy);
  v.details["timing"] = {{"pairs", 120}};
  v.finalize();
  const Verdict back = Verdict::from_json(v.to_json());
  EXPECT_EQ(back.to_json(), v.to_json());
}

TEST(Verdict, SummaryLineStartsWithStatus) {
  Verdict v = timed_ok();
  v.finalize();
  const std::string line = v.summary_line();
  EXPECT_EQ(line.rfind("ok 1.876x", 0), 0u) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(Status, NamesRoundTrip) {
  for (auto s : {Status::kOk, Status::kIncorrect, Status::kRejected, Status::kCompileError,
                 Status::kRuntimeError, Status::kTimeout, Status::kUnparseable}) {
    EXPECT_EQ(parse_status(to_string(s)), s);
  }
  EXPECT_FALSE(parse_status("fine"));
}

TEST(Seeds, DerivedSeedsReplayAndDiffer) {
  const SeedPlan a = SeedPlan::derive(12345, 5), b = SeedPlan::derive(12345, 5),
                 c = SeedPlan::derive(12346, 5);
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_NE(a.to_json(), c.to_json());
  std::set<std::uint64_t> distinct(a.trials.begin(), a.trials.end());
  distinct.insert(a.init);
  EXPECT_EQ(distinct.size(), 6u);
  for (auto s : a.trials) EXPECT_LT(s, std::uint64_t{1} << 53);
}

bool has_line(const std::string& text, const std::string& start, const std::string& part) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.rfind(start, 0) == 0 && line.find(part) != std::string::npos) return true;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

TEST(VerdictText, OkWithRoundsDeviceAndFlagMeanings) {
  Verdict v = timed_ok();
  v.speedup_ci = Interval{1.80, 1.95};
  v.device = {{"name", "NVIDIA H100 80GB HBM3"}, {"index", 0}};
  v.flags = {"noisy"};
  v.details["timing"] = {{"rounds", nlohmann::json::array({1, 2, 3})}};
  v.details["trials"] = nlohmann::json::array({1, 2, 3, 4, 5});
  v.details["profile"] = {
      {"candidate", {{"time_ms", 1.066}, {"summary", "1.07 ms per call; launch-bound: ..."}}}};
  v.finalize();
  const std::string text = verdict_text(v);
  EXPECT_EQ(text.rfind("ok: 1.876x faster, 95% interval 1.800x to 1.950x, reward ", 0), 0u) << text;
  EXPECT_TRUE(
      has_line(text, "times", "reference 2 ms, candidate 1.066 ms (120 samples in 3 rounds)"))
      << text;
  EXPECT_TRUE(has_line(text, "device", "NVIDIA H100 80GB HBM3 (cuda:0)")) << text;
  EXPECT_TRUE(has_line(text, "profile", "1.07 ms per call; launch-bound: ...")) << text;
  EXPECT_TRUE(has_line(text, "correct", "outputs match on 5 trials with fresh inputs")) << text;
  EXPECT_TRUE(has_line(text, "flags", std::string(find_flag("noisy")->description).substr(0, 30)))
      << text;
  EXPECT_EQ(text.back(), '\n');
}

TEST(VerdictText, RejectionSaysWhichFindingDecided) {
  Verdict v;
  v.status = Status::kOk;
  v.correct = true;
  v.speedup = 40.0;
  v.reference_ms = 4.0;
  v.candidate_ms = 0.1;
  v.flags = {"cached_output"};
  v.details["findings"] = {{"cached_output", {"the output did not change when the inputs did"}}};
  v.details["review"] = {{"state", "unreviewed"}, {"reason", "speedup 40.00x is above 3.00x"}};
  v.error = "cached_output: the output did not change when the inputs did";
  v.finalize();
  ASSERT_EQ(v.status, Status::kRejected);
  const std::string text = verdict_text(v);
  EXPECT_EQ(text.rfind("rejected: reward 0.000 (it measured 40.000x)", 0), 0u) << text;
  EXPECT_TRUE(has_line(text, "why", "cached_output: the output did not change")) << text;
  EXPECT_TRUE(has_line(text, "flags", "cached_output  rejects: ")) << text;
  EXPECT_TRUE(has_line(text, " ", "found: the output did not change when the inputs did")) << text;
  EXPECT_TRUE(has_line(text, "review", "unreviewed (speedup 40.00x is above 3.00x)")) << text;
}

TEST(VerdictText, FailureShowsTheErrorAndLongLinesAreCut) {
  Verdict v = unusable_candidate_verdict(std::string(500, 'x') + "\nsecond line");
  const std::string text = verdict_text(v, 80);
  EXPECT_EQ(text.rfind("compile_error: reward 0.000\n", 0), 0u) << text;
  EXPECT_TRUE(has_line(text, "error", std::string(77, 'x') + "...")) << text;
  EXPECT_EQ(text.find("second line"), std::string::npos);
}

TEST(Seeds, FreshMastersAreUnpredictable) {
  EXPECT_NE(SeedPlan::fresh_master(), SeedPlan::fresh_master());
}

}  // namespace
}  // namespace cudal1
