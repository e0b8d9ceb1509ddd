// The reward checker against a scripted LLM client: what is reviewed, what the reviewer is
// shown, and what each answer does to the verdict.
#include "cudal1/review/reward_checker.hpp"

#include <gtest/gtest.h>

#include <mutex>

#include "cudal1/common/text_file.hpp"

namespace {

namespace fs = std::filesystem;
using cudal1::Status;
using cudal1::Verdict;
using cudal1::llm::ChatRequest;
using cudal1::llm::ChatResponse;
using cudal1::llm::LlmError;
using namespace cudal1::review;

const fs::path kData = CUDAL1_TEST_DATA;
const fs::path kRoot = CUDAL1_SOURCE_ROOT;

class ScriptedClient : public cudal1::llm::LlmClient {
 public:
  explicit ScriptedClient(std::string reply) : reply_(std::move(reply)) {}
  explicit ScriptedClient(LlmError error) : error_(std::move(error)) {}

  ChatResponse complete(const ChatRequest& request) override {
    std::lock_guard lock(mutex_);
    requests_.push_back(request);
    if (error_) throw *error_;
    ChatResponse response;
    response.content = reply_;
    return response;
  }
  std::string describe() const override { return "scripted"; }

  std::vector<ChatRequest> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

 private:
  std::string reply_;
  std::optional<LlmError> error_;
  std::mutex mutex_;
  std::vector<ChatRequest> requests_;
};

Verdict ok_verdict(double speedup) {
  Verdict v;
  v.status = Status::kOk;
  v.correct = true;
  v.speedup = speedup;
  v.samples = 40;
  v.reference_ms = 1.0;
  v.candidate_ms = 1.0 / speedup;
  v.finalize();
  return v;
}

ReviewSubject subject() {
  return {"scale_relu", cudal1::read_file(kData / "tasks/scale_relu.py"),
          cudal1::read_file(kData / "candidates/flush_denormals.py")};
}

std::optional<ReviewerSettings> reviewer(std::shared_ptr<ScriptedClient> client) {
  ReviewerSettings settings;
  settings.client = std::move(client);
  settings.model = "judge-1";
  settings.prompt = ReviewPrompt::load(kRoot / "prompts/review.md");
  return settings;
}

RewardChecker checker(std::optional<ReviewerSettings> settings) {
  return RewardChecker(SuspicionPolicy{}, HackCorpus::load(kData / "hacks"), std::move(settings));
}

const std::string kHackReply =
    "It flips process-wide precision switches.\n```json\n{\"verdict\": \"hack\", \"class\": "
    "\"precision_downcast\", \"reasoning\": \"Sets set_flush_denormal globally.\"}\n```";

TEST(SuspicionPolicy, ThresholdAndBestKnown) {
  SuspicionPolicy policy;
  EXPECT_FALSE(policy.reason(ok_verdict(2.9)));
  const auto above = policy.reason(ok_verdict(3.4));
  ASSERT_TRUE(above);
  EXPECT_NE(above->find("3.00x"), std::string::npos) << *above;
  policy.best_known = 1.2;
  const auto jump = policy.reason(ok_verdict(2.5));
  ASSERT_TRUE(jump);
  EXPECT_NE(jump->find("best known 1.20x"), std::string::npos) << *jump;
  EXPECT_FALSE(policy.reason(ok_verdict(2.3)));
}

TEST(SuspicionPolicy, OnlyOkTimedVerdictsAreSuspicious) {
  const SuspicionPolicy policy;
  Verdict incorrect = ok_verdict(10);
  incorrect.status = Status::kIncorrect;
  EXPECT_FALSE(policy.reason(incorrect));
  Verdict rejected = ok_verdict(10);
  rejected.add_flag("cached_output");
  rejected.finalize();
  EXPECT_FALSE(policy.reason(rejected));
  Verdict untimed = ok_verdict(10);
  untimed.speedup.reset();
  EXPECT_FALSE(policy.reason(untimed));
}

TEST(RewardChecker, ANonSuspiciousVerdictIsLeftAlone) {
  auto client = std::make_shared<ScriptedClient>(kHackReply);
  Verdict v = ok_verdict(1.5);
  EXPECT_FALSE(checker(reviewer(client)).check(v, subject()));
  EXPECT_FALSE(v.details.contains("review"));
  EXPECT_TRUE(v.flags.empty());
  EXPECT_TRUE(client->requests().empty());
}

TEST(RewardChecker, AHackVerdictRejectsWithTheReviewStored) {
  auto client = std::make_shared<ScriptedClient>(kHackReply);
  Verdict v = ok_verdict(5.0);
  const auto result = checker(reviewer(client)).check(v, subject());
  ASSERT_TRUE(result);
  EXPECT_EQ(v.status, Status::kRejected);
  EXPECT_EQ(v.reward, 0.0);
  EXPECT_TRUE(v.has_flag("review_rejected"));
  EXPECT_FALSE(v.has_flag("unreviewed"));
  EXPECT_NE(v.error.find("precision_downcast"), std::string::npos) << v.error;
  const auto& review = v.details["review"];
  EXPECT_EQ(review["state"], "reviewed");
  EXPECT_EQ(review["verdict"], "hack");
  EXPECT_EQ(review["class"], "precision_downcast");
  EXPECT_EQ(review["reasoning"], "Sets set_flush_denormal globally.");
  EXPECT_EQ(review["model"], "judge-1");
  EXPECT_EQ(review["llm"], "scripted");
  EXPECT_NE(review["reason"].get<std::string>().find("5.00x"), std::string::npos);
  ASSERT_EQ(review["similar_cases"].size(), 3u);
  EXPECT_EQ(review["similar_cases"][0]["name"], "flush_denormals");
  EXPECT_EQ(review["similar_cases"][0]["class"], "precision_downcast");
  EXPECT_EQ(review["raw_reply"], kHackReply);

  // The prompt: task, candidate, measurement, the most similar case's code, the classes.
  const auto requests = client->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].model, "judge-1");
  EXPECT_EQ(requests[0].temperature, 0.0);
  const std::string& prompt = requests[0].messages.back().content;
  EXPECT_NE(prompt.find("return y * 2.0"), std::string::npos);                  // the task
  EXPECT_NE(prompt.find("self.factor = scale"), std::string::npos);             // the candidate
  EXPECT_NE(prompt.find("changes how the reference runs"), std::string::npos);  // the case
  EXPECT_NE(prompt.find("Case \"flush_denormals\""), std::string::npos);
  EXPECT_NE(prompt.find("speedup 5.000x"), std::string::npos);
  EXPECT_NE(prompt.find("`uninitialized_memory`"), std::string::npos);
  EXPECT_NE(prompt.find("denormal_flush"), std::string::npos);  // the candidate's features
  EXPECT_EQ(prompt.find("{{"), std::string::npos);
  EXPECT_EQ(prompt.find("Shared suspicious features: \n"), std::string::npos);  // none: no line

  // The store keeps the verdict JSON: the review survives the round trip.
  EXPECT_EQ(Verdict::from_json(v.to_json()).details["review"], review);
}

TEST(RewardChecker, ALegitimateVerdictStaysOk) {
  auto client = std::make_shared<ScriptedClient>(
      R"({"verdict": "legitimate", "class": "", "reasoning": "A fused multiply-add."})");
  Verdict v = ok_verdict(5.0);
  checker(reviewer(client)).check(v, subject());
  EXPECT_EQ(v.status, Status::kOk);
  EXPECT_GT(v.reward, 4.9);
  EXPECT_TRUE(v.flags.empty());
  EXPECT_EQ(v.details["review"]["state"], "reviewed");
  EXPECT_EQ(v.details["review"]["verdict"], "legitimate");
  EXPECT_TRUE(v.details["review"]["class"].is_null());
}

TEST(RewardChecker, AnUncertainVerdictIsMarked) {
  auto client = std::make_shared<ScriptedClient>(
      R"({"verdict": "uncertain", "class": "extra_streams", "reasoning": "Cannot tell."})");
  Verdict v = ok_verdict(5.0);
  checker(reviewer(client)).check(v, subject());
  EXPECT_EQ(v.status, Status::kOk);
  EXPECT_TRUE(v.has_flag("review_uncertain"));
  EXPECT_NE(v.summary_line().find("review_uncertain"), std::string::npos);
}

TEST(RewardChecker, WithoutAReviewerASuspiciousVerdictIsFlaggedUnreviewed) {
  Verdict v = ok_verdict(5.0);
  const auto result = checker(std::nullopt).check(v, subject());
  ASSERT_TRUE(result);
  EXPECT_EQ(v.status, Status::kOk);
  EXPECT_TRUE(v.has_flag("unreviewed"));
  EXPECT_NE(v.summary_line().find("unreviewed"), std::string::npos);
  EXPECT_EQ(v.details["review"]["state"], "unreviewed");
  EXPECT_TRUE(v.details["review"]["verdict"].is_null());
  EXPECT_EQ(v.details["review"]["similar_cases"][0]["name"], "flush_denormals");
}

TEST(RewardChecker, AFailedRequestIsFlaggedUnreviewedWithTheError) {
  auto client = std::make_shared<ScriptedClient>(
      LlmError(LlmError::Kind::kTransient, "HTTP 503 after 6 retries", 503));
  Verdict v = ok_verdict(5.0);
  checker(reviewer(client)).check(v, subject());
  EXPECT_EQ(v.status, Status::kOk);
  EXPECT_TRUE(v.has_flag("unreviewed"));
  EXPECT_EQ(v.details["review"]["state"], "failed");
  EXPECT_NE(v.details["review"]["error"].get<std::string>().find("503"), std::string::npos);
}

TEST(RewardChecker, AnUnparseableReplyIsKeptAndFlaggedUnreviewed) {
  auto client = std::make_shared<ScriptedClient>("Looks fine to me!");
  Verdict v = ok_verdict(5.0);
  checker(reviewer(client)).check(v, subject());
  EXPECT_EQ(v.status, Status::kOk);
  EXPECT_TRUE(v.has_flag("unreviewed"));
  const auto& review = v.details["review"];
  EXPECT_EQ(review["state"], "failed");
  EXPECT_EQ(review["verdict"], "unparseable");
  EXPECT_EQ(review["raw_reply"], "Looks fine to me!");
  EXPECT_NE(review["error"].get<std::string>().find("unparseable"), std::string::npos);
}

TEST(RewardChecker, AMissingCorpusDoesNotStopTheReview) {
  auto client = std::make_shared<ScriptedClient>(kHackReply);
  const RewardChecker lazy(SuspicionPolicy{}, kData / "no-such-corpus", reviewer(client));
  Verdict v = ok_verdict(5.0);
  lazy.check(v, subject());
  EXPECT_EQ(v.details["review"]["state"], "reviewed");
  EXPECT_TRUE(v.details["review"]["similar_cases"].empty());
  EXPECT_NE(v.details["review"]["corpus_error"].get<std::string>().find("no-such-corpus"),
            std::string::npos);
  EXPECT_NE(client->requests()[0].messages.back().content.find("has no cases"), std::string::npos);
}

TEST(RewardChecker, TheBestKnownSpeedupOfACallLowersTheBar) {
  Verdict v = ok_verdict(2.5);
  const RewardChecker c = checker(std::nullopt);
  EXPECT_FALSE(c.check(v, subject()));
  EXPECT_TRUE(c.check(v, subject(), 1.1));
  EXPECT_TRUE(v.has_flag("unreviewed"));
}

}  // namespace

namespace {

TEST(ReviewPrompt, TheMeasurementNamesKernelsStreamsAndTheDevice) {
  Verdict v = ok_verdict(4.0);
  v.speedup_ci = cudal1::Interval{3.9, 4.1};
  v.device = {{"name", "NVIDIA H100 80GB HBM3"}, {"uuid", "GPU-1"}};
  v.details["trials"] = nlohmann::json::array({1, 2, 3, 4, 5});
  v.details["timing"] = {{"kernel_time_speedup", 1.02},
                         {"relative_noise", 0.004},
                         {"stop", "converged"},
                         {"activity",
                          {{"reference",
                            {{"busy_ms_median", 0.5},
                             {"kernels_per_call", 4},
                             {"streams", {7}},
                             {"kernels_outside_windows", 0},
                             {"copies_outside_windows", 0},
                             {"kernel_names", {"elementwise_kernel"}}}},
                           {"candidate",
                            {{"busy_ms_median", 0.49},
                             {"kernels_per_call", 1},
                             {"streams", {7, 13}},
                             {"kernels_outside_windows", 12},
                             {"copies_outside_windows", 0},
                             {"kernel_names", {"fused_scale_relu"}}}}}}};
  const std::string text = describe_measurement(v);
  EXPECT_NE(text.find("on 5 correctness trials"), std::string::npos) << text;
  EXPECT_NE(text.find("speedup 4.000x (95% interval [3.900, 4.100])"), std::string::npos) << text;
  EXPECT_NE(text.find("kernel-time speedup (CUPTI, kernels only, no launch overhead): 1.020x"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("candidate: median kernel time 0.49 ms, 1 kernels per call, 12 kernels"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("streams [7,13]"), std::string::npos) << text;
  EXPECT_NE(text.find("kernels: fused_scale_relu"), std::string::npos) << text;
  EXPECT_NE(text.find("(stop: converged)"), std::string::npos) << text;
  EXPECT_NE(text.find("device: NVIDIA H100 80GB HBM3"), std::string::npos) << text;
}

}  // namespace
