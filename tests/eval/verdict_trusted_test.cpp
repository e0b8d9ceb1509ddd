// Verdict::trusted(): the one rule for a speedup that rewards, best known results, exemplars and
// training data may rest on.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cudal1/eval/verdict.hpp"

namespace cudal1 {
namespace {

Verdict timed(Status status, double speedup) {
  Verdict v;
  v.status = status;
  v.correct = status == Status::kOk;
  v.speedup = speedup;
  v.speedup_ci = Interval{0.9 * speedup, 1.1 * speedup};
  return v;
}

TEST(VerdictTrusted, AnOkTimedVerdictIsTrusted) {
  Verdict v = timed(Status::kOk, 1.8);
  EXPECT_TRUE(v.trusted());
  v.finalize();
  EXPECT_TRUE(v.trusted());
}

TEST(VerdictTrusted, ASlowerCandidateIsTrustedToo) {
  EXPECT_TRUE(timed(Status::kOk, 0.4).trusted());
}

TEST(VerdictTrusted, AnOkVerdictWithoutASpeedupIsNotTrusted) {
  Verdict v = timed(Status::kOk, 1.0);
  v.speedup.reset();
  EXPECT_FALSE(v.trusted());
}

TEST(VerdictTrusted, EveryOtherStatusIsNotTrusted) {
  for (const Status status : {Status::kIncorrect, Status::kRejected, Status::kCompileError,
                              Status::kRuntimeError, Status::kTimeout, Status::kUnparseable}) {
    EXPECT_FALSE(timed(status, 2.0).trusted()) << to_string(status);
  }
}

TEST(VerdictTrusted, ARejectFlagIsNeverTrusted) {
  // Stored as ok by an older cudal1, before finalize() rejected it.
  for (const std::string_view name :
       {flag::kCachedOutput, flag::kSubPhysicalTime, flag::kReviewRejected, flag::kTampering}) {
    Verdict v = timed(Status::kOk, 3.0);
    v.add_flag(name);
    EXPECT_FALSE(v.trusted()) << name;
    v.finalize();
    EXPECT_EQ(v.status, Status::kRejected) << name;
    EXPECT_FALSE(v.trusted()) << name;
  }
}

TEST(VerdictTrusted, FlagsOutsideTheRejectSetLeaveItTrusted) {
  Verdict v = timed(Status::kOk, 1.3);
  for (const std::string_view name : {flag::kNoisy, flag::kExtraStreams, flag::kUnreviewed,
                                      flag::kReviewUncertain, flag::kNoCustomKernel}) {
    v.add_flag(name);
  }
  v.task_flags.push_back(std::string(flag::kDegenerate));
  EXPECT_TRUE(v.trusted());
}

TEST(VerdictTrusted, ItSurvivesTheJsonRoundTrip) {
  Verdict v = timed(Status::kOk, 2.5);
  v.finalize();
  EXPECT_TRUE(Verdict::from_json(v.to_json()).trusted());
  // A speedup that is not finite is written as null: nothing left to trust.
  v.speedup = NAN;
  EXPECT_FALSE(Verdict::from_json(v.to_json()).trusted());
}

TEST(VerdictTrusted, AnUnusableCandidateIsNotTrusted) {
  EXPECT_FALSE(unusable_candidate_verdict("SyntaxError: invalid syntax").trusted());
}

}  // namespace
}  // namespace cudal1
