// cudal1 review: stored verdicts flagged unreviewed are reviewed later, one question per code of
// a task, and the answer is written back to every verdict with that code.
#include "cudal1/data/stored_review.hpp"

#include <gtest/gtest.h>

#include <mutex>

#include "../store/store_fixture.hpp"

namespace cudal1::data {
namespace {

using nlohmann::json;
using store::testing::StoreFixture;

// Judges code containing "cache" a hack, anything else legitimate; counts the questions.
class ScriptedReviewer : public llm::LlmClient {
 public:
  llm::ChatResponse complete(const llm::ChatRequest& request) override {
    std::lock_guard lock(mutex_);
    ++asked_;
    const std::string& prompt = request.messages.back().content;
    llm::ChatResponse response;
    response.content =
        prompt.find("cache = {}") != std::string::npos
            ? R"({"verdict": "hack", "class": "cached_output", "reasoning": "Returns a cached output."})"
            : R"({"verdict": "legitimate", "class": "", "reasoning": "Scales rows in one pass."})";
    return response;
  }
  std::string describe() const override { return "scripted"; }
  int asked() {
    std::lock_guard lock(mutex_);
    return asked_;
  }

 private:
  std::mutex mutex_;
  int asked_ = 0;
};

class StoredReview : public StoreFixture {
 protected:
  std::int64_t run_of(const std::string& stage) {
    const auto task = store().upsert_task("/suite/level1/12_DiagMatmul.py",
                                          "class Model:\n    def forward(self, a, b): ...\n");
    store::RunRecord run;
    run.task_id = task.id;
    run.model = "m";
    run.llm = "batch";
    run.options = {{"stage", stage}, {"suite_key", "level1/12_DiagMatmul"}};
    return store().create_run(run);
  }

  // A reply with `code`, verified at `speedup` with `flags` (and the earlier review's record).
  std::int64_t reply(std::int64_t run, const std::string& code, double speedup,
                     std::vector<std::string> flags,
                     std::optional<std::int64_t> duplicate_of = std::nullopt) {
    const auto prompt = new_prompt(run, 0, next_sample_++);
    store().record_response(response_to(prompt.id));
    const auto id = store().add_candidate(candidate_of(run, prompt.id, code));
    Verdict v;
    v.status = Status::kOk;
    v.correct = true;
    v.speedup = speedup;
    v.speedup_ci = Interval{speedup * 0.98, speedup * 1.02};
    v.flags = std::move(flags);
    v.details["review"] = {{"state", "unreviewed"}, {"reason", "speedup above the threshold"}};
    v.finalize();
    auto record = store::verdict_record_of(id, v);
    record.duplicate_of = duplicate_of;
    store().record_verdict(record);
    return id;
  }

  review::RewardChecker checker(std::shared_ptr<ScriptedReviewer> client) {
    review::ReviewerSettings settings;
    settings.client = std::move(client);
    settings.model = "judge";
    settings.prompt = review::ReviewPrompt::load(CUDAL1_PROMPTS_DIR "/review.md");
    return review::RewardChecker(review::SuspicionPolicy{}, review::HackCorpus{}, settings);
  }

  int next_sample_ = 0;
};

TEST_F(StoredReview, LegitimateClearsTheFlagAndHackRejects) {
  const auto run = run_of("generate");
  const auto fast = reply(run, "out = a.unsqueeze(1) * b\n", 437.0, {"unreviewed"});
  const auto copy = reply(run, "out = a.unsqueeze(1) * b\n", 437.0, {"unreviewed"}, fast);
  const auto cached = reply(run, "cache = {}\n", 90.0, {"unreviewed", "noisy"});
  const auto plain = reply(run, "out = torch.mm(a, b)\n", 1.1, {});
  const auto client = std::make_shared<ScriptedReviewer>();
  std::vector<std::string> lines;
  const auto counts = review_stored(store(), checker(client), {},
                                    [&](const std::string& line) { lines.push_back(line); });
  EXPECT_EQ(counts.unreviewed, 3u);
  EXPECT_EQ(counts.asked, 2u) << "the copy of the same code is not asked about again";
  EXPECT_EQ(client->asked(), 2);
  EXPECT_EQ(counts.legitimate, 2u);
  EXPECT_EQ(counts.hack, 1u);
  EXPECT_EQ(counts.updated, 3u);
  EXPECT_EQ(lines.size(), 2u);

  for (const auto id : {fast, copy}) {
    const auto v = store().verdict(id);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->status, "ok");
    EXPECT_GT(v->reward, 0);
    EXPECT_EQ(v->verdict["flags"], json::array());
    EXPECT_EQ(v->verdict["review"]["state"], "reviewed");
    EXPECT_EQ(v->verdict["review"]["verdict"], "legitimate");
    EXPECT_EQ(v->verdict["review"]["reason"], "speedup above the threshold");
    EXPECT_EQ(v->verdict["review"]["earlier"]["state"], "unreviewed");
    EXPECT_FALSE(v->verdict["review"]["reviewed_at"].get<std::string>().empty());
  }
  EXPECT_EQ(store().verdict(copy)->duplicate_of, fast) << "a copy stays a copy";
  const auto rejected = store().verdict(cached);
  EXPECT_EQ(rejected->status, "rejected");
  EXPECT_EQ(rejected->reward, 0);
  EXPECT_EQ(rejected->verdict["flags"], json({"noisy", "review_rejected"}));
  EXPECT_NE(rejected->verdict["error"].get<std::string>().find("cached_output"), std::string::npos);
  EXPECT_EQ(store().verdict(plain)->verdict["flags"], json::array()) << "left alone";

  // Nothing is left to review.
  const auto again = review_stored(store(), checker(client), {});
  EXPECT_EQ(again.unreviewed, 0u);
  EXPECT_EQ(client->asked(), 2);
}

TEST_F(StoredReview, RunAndStageSelectTheVerdicts) {
  const auto generate = run_of("generate");
  const auto rl = run_of("rl");
  const auto a = reply(generate, "a = 1\n", 50.0, {"unreviewed"});
  const auto b = reply(rl, "b = 2\n", 50.0, {"unreviewed"});
  const auto client = std::make_shared<ScriptedReviewer>();
  StoredReviewFilter only_rl;
  only_rl.stage = "rl";
  EXPECT_EQ(review_stored(store(), checker(client), only_rl).updated, 1u);
  EXPECT_EQ(store().verdict(a)->verdict["flags"], json({"unreviewed"}));
  EXPECT_EQ(store().verdict(b)->verdict["flags"], json::array());
  StoredReviewFilter by_run;
  by_run.run = generate;
  EXPECT_EQ(review_stored(store(), checker(client), by_run).updated, 1u);
  EXPECT_EQ(store().verdict(a)->verdict["flags"], json::array());

  StoredReviewFilter bad_stage;
  bad_stage.stage = "eval";
  EXPECT_THROW(review_stored(store(), checker(client), bad_stage), std::invalid_argument);
  StoredReviewFilter missing;
  missing.run = 99;
  EXPECT_THROW(review_stored(store(), checker(client), missing), std::invalid_argument);
}

}  // namespace
}  // namespace cudal1::data
