// What cudal1 serve records: the rewards given to trainers (schema version 2), in order with
// their request, step and group, read back per task for smoothing; the answer of each request
// with its rewards, all or nothing (version 3); a candidate with its verdict, all or nothing; and
// the upgrades of older stores, which keep what they hold.
#include <gtest/gtest.h>

#include "cudal1/store/store.hpp"
#include "store_fixture.hpp"

namespace cudal1::store::testing {
namespace {

class StoreRewards : public StoreFixture {
 protected:
  static RewardRecord reward(const std::string& task, double raw,
                             std::optional<std::int64_t> candidate = std::nullopt) {
    RewardRecord r;
    r.task_key = task;
    r.candidate_id = candidate;
    r.request_id = "req";
    r.status = raw > 0 ? "ok" : "incorrect";
    r.raw_reward = raw;
    r.reward = raw / 2;
    return r;
  }
  static AnswerRecord answer_for(const std::string& key, const std::string& body) {
    AnswerRecord answer;
    answer.request_key = key;
    answer.request_id = "req";
    answer.endpoint = "/v1/rewards";
    answer.body = body;
    return answer;
  }
};

TEST_F(StoreRewards, RecordedInOrderWithTheirFields) {
  const auto run = new_run();
  const auto candidate = store().add_candidate(candidate_of(run, std::nullopt, "class ModelNew"));
  auto first = reward("level1/1_A", 1.25, candidate);
  first.step = 7;
  first.group = "g";
  first.advantage = -0.5;
  store().record_rewards({first, reward("level1/2_B", 0.0), reward("level1/1_A", 2.0)});
  const auto all = store().rewards();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].task_key, "level1/1_A");
  EXPECT_EQ(*all[0].candidate_id, candidate);
  EXPECT_EQ(*all[0].step, 7);
  EXPECT_EQ(*all[0].group, "g");
  EXPECT_EQ(*all[0].advantage, -0.5);
  EXPECT_EQ(all[0].reward, 0.625);
  EXPECT_FALSE(all[1].candidate_id);
  EXPECT_FALSE(all[1].step);
  EXPECT_FALSE(all[1].group);
  EXPECT_FALSE(all[1].advantage);
  EXPECT_FALSE(all[0].created_at.empty());
  EXPECT_LT(all[0].id, all[1].id);
}

TEST_F(StoreRewards, RecentRawRewardsOfATaskOldestFirst) {
  store().record_rewards({reward("a", 1), reward("b", 9), reward("a", 2), reward("a", 3)});
  store().record_rewards({reward("a", 4)});
  EXPECT_EQ(store().recent_raw_rewards("a", 3), (std::vector<double>{2, 3, 4}));
  EXPECT_EQ(store().recent_raw_rewards("a", 10), (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(store().recent_raw_rewards("b", 10), (std::vector<double>{9}));
  EXPECT_TRUE(store().recent_raw_rewards("c", 10).empty());
  reopen();
  EXPECT_EQ(store().recent_raw_rewards("a", 2), (std::vector<double>{3, 4}));
}

TEST_F(StoreRewards, AnUnknownCandidateIsRefusedAndNothingOfTheBatchIsKept) {
  EXPECT_THROW(store().record_rewards({reward("a", 1), reward("a", 2, 999)}), StoreError);
  EXPECT_TRUE(store().rewards().empty());
}

TEST_F(StoreRewards, AVersionOneStoreGainsTheTableAndKeepsItsRuns) {
  const auto run = new_run();
  store_.reset();
  // What a store written before rewards were recorded looks like.
  ASSERT_EQ(execute_raw(database_,
                        "DROP TABLE rewards; DROP TABLE reward_answers; PRAGMA user_version = 1"),
            "");
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "1");
  store().record_rewards({reward("a", 1)});
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "3");
  ASSERT_TRUE(store().run(run));
  EXPECT_EQ(store().rewards().size(), 1u);
}

TEST_F(StoreRewards, AVersionTwoStoreGainsTheAnswersAndKeepsItsRewards) {
  store();
  store_.reset();
  // The rewards table as version 2 made it, with a reward given then.
  ASSERT_EQ(execute_raw(database_, R"sql(
    DROP TABLE rewards; DROP TABLE reward_answers;
    CREATE TABLE rewards (id INTEGER PRIMARY KEY, task_key TEXT NOT NULL,
      candidate_id INTEGER REFERENCES candidates (id), request_id TEXT NOT NULL, step INTEGER,
      group_id TEXT, status TEXT NOT NULL, raw_reward REAL NOT NULL, reward REAL NOT NULL,
      advantage REAL, created_at TEXT NOT NULL);
    INSERT INTO rewards (task_key, request_id, status, raw_reward, reward, created_at)
      VALUES ('a', 'old', 'ok', 1.5, 0, '2024-01-01T00:00:00Z');
    PRAGMA user_version = 2)sql"),
            "");
  ASSERT_TRUE(store().record_answer(answer_for("k", "{}"), {reward("a", 2)}));
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "3");
  const auto all = store().rewards();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].request_id, "old");
  EXPECT_FALSE(all[0].answer_id);
  EXPECT_EQ(all[1].answer_id, store().answer("k")->id);
  EXPECT_EQ(store().recent_raw_rewards("a", 10), (std::vector<double>{1.5, 2}));
}

TEST_F(StoreRewards, AnAnswerIsRecordedOnceWithItsRewardsAndFoundByItsKey) {
  const std::string body = R"({"request_id": "r1", "results": [{"reward": 0.5}]})";
  ASSERT_TRUE(store().record_answer(answer_for("key-1", body), {reward("a", 1), reward("b", 2)}));
  reopen();  // as a restarted server finds it
  const auto answer = store().answer("key-1");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->body, body);
  EXPECT_EQ(answer->request_id, "req");
  EXPECT_EQ(answer->endpoint, "/v1/rewards");
  EXPECT_FALSE(answer->answered_at.empty());
  auto all = store().rewards();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].answer_id, answer->id);
  EXPECT_EQ(all[1].answer_id, answer->id);
  EXPECT_FALSE(store().answer("key-2"));

  // The same request again: nothing is added and the first answer stands.
  EXPECT_FALSE(store().record_answer(answer_for("key-1", "another body"), {reward("a", 9)}));
  EXPECT_EQ(store().answer("key-1")->body, body);
  EXPECT_EQ(store().rewards().size(), 2u);
  EXPECT_EQ(store().recent_raw_rewards("a", 10), (std::vector<double>{1}));
}

TEST_F(StoreRewards, WithinAReplayTimeAnOlderAnswerIsANewRequest) {
  auto old = answer_for("k", "old body");
  old.answered_at = "2020-01-01T00:00:00Z";
  ASSERT_TRUE(store().record_answer(old, {reward("a", 1)}));
  EXPECT_FALSE(store().answer("k", 900.0));
  ASSERT_TRUE(store().answer("k"));
  EXPECT_EQ(store().answer("k")->body, "old body");
  EXPECT_FALSE(store().record_answer(answer_for("k", "new body"), {reward("a", 2)}));
  // Sent again long after its answer: rewarded again, and then the new answer stands.
  ASSERT_TRUE(store().record_answer(answer_for("k", "new body"), {reward("a", 2)}, 900.0));
  EXPECT_EQ(store().answer("k", 900.0)->body, "new body");
  EXPECT_EQ(store().answer("k")->body, "new body");
  EXPECT_FALSE(store().record_answer(answer_for("k", "third body"), {reward("a", 3)}, 900.0));
  EXPECT_EQ(store().recent_raw_rewards("a", 10), (std::vector<double>{1, 2}));
}

TEST_F(StoreRewards, AnAnswerWhoseRewardsCannotBeRecordedIsNotRecordedEither) {
  EXPECT_THROW(store().record_answer(answer_for("k", "{}"), {reward("a", 1), reward("a", 2, 999)}),
               StoreError);
  EXPECT_FALSE(store().answer("k"));
  EXPECT_TRUE(store().rewards().empty());
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM reward_answers"), "0");
  // The key is still free for the request's next attempt.
  EXPECT_TRUE(store().record_answer(answer_for("k", "{}"), {reward("a", 1)}));
}

TEST_F(StoreRewards, AnEvaluatedCandidateIsRecordedWithItsVerdictOrNotAtAll) {
  const auto run = new_run();
  const auto id = store().add_evaluated_candidate(candidate_of(run, std::nullopt, "class ModelNew"),
                                                  verdict_of(0, 1.5));
  ASSERT_TRUE(store().verdict(id));
  EXPECT_EQ(store().verdict(id)->speedup, 1.5);
  const auto found = store().verdict_for_source(run, store().candidates(run).at(0).source_sha256);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->candidate_id, id);
  // A verdict that cannot be recorded (it names a candidate that does not exist) takes its
  // candidate with it.
  EXPECT_THROW(store().add_evaluated_candidate(candidate_of(run, std::nullopt, "class Other"),
                                               verdict_of(0, 2.0, "ok", 999)),
               StoreError);
  EXPECT_EQ(store().candidates(run).size(), 1u);
}

TEST_F(StoreRewards, CandidatesLeftWithoutAVerdictAreRemovedUnlessSomethingNamesThem) {
  const auto run = new_run();
  const auto evaluated = store().add_evaluated_candidate(
      candidate_of(run, std::nullopt, "class ModelNew: evaluated"), verdict_of(0, 1.2));
  store().add_candidate(candidate_of(run, std::nullopt, "class ModelNew: killed mid-evaluation"));
  const auto rewarded = store().add_candidate(candidate_of(run, std::nullopt, "engine failed"));
  store().record_rewards({reward("a", 0, rewarded)});
  const auto reference = store().add_candidate(candidate_of(run, std::nullopt, "ref", "reference"));
  const auto other_run = new_run("other");
  const auto elsewhere = store().add_candidate(candidate_of(other_run, std::nullopt, "x"));

  EXPECT_EQ(store().remove_unevaluated_candidates(run), 1u);
  std::vector<std::int64_t> kept;
  for (const auto& c : store().candidates(run)) kept.push_back(c.id);
  EXPECT_EQ(kept, (std::vector<std::int64_t>{evaluated, rewarded, reference}));
  EXPECT_EQ(store().candidates(other_run).at(0).id, elsewhere);
  EXPECT_EQ(store().remove_unevaluated_candidates(run), 0u);
}

}  // namespace
}  // namespace cudal1::store::testing
