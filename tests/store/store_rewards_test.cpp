// The rewards given to trainers (schema version 2): recorded in order with their request, step
// and group, read back per task for smoothing, and added to a version-1 store without touching
// what it holds.
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
  ASSERT_EQ(execute_raw(database_, "DROP TABLE rewards; PRAGMA user_version = 1"), "");
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "1");
  store().record_rewards({reward("a", 1)});
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "2");
  ASSERT_TRUE(store().run(run));
  EXPECT_EQ(store().rewards().size(), 1u);
}

}  // namespace
}  // namespace cudal1::store::testing
