// The rewards the training view reads: in the order given, with the verified speedup of each
// completion that was verified and not a hack.
#include <gtest/gtest.h>

#include "../store/store_fixture.hpp"
#include "cudal1/data/training_log.hpp"

namespace cudal1::data {
namespace {

using store::testing::StoreFixture;

class RewardEvents : public StoreFixture {
 protected:
  store::RewardRecord reward(std::optional<std::int64_t> candidate, const std::string& status,
                             std::optional<std::int64_t> step, double raw) {
    store::RewardRecord r;
    r.task_key = "level1/1_Relu";
    r.candidate_id = candidate;
    r.request_id = "req";
    r.step = step;
    r.status = status;
    r.raw_reward = raw;
    r.reward = raw - 1.0;
    return r;
  }
};

TEST_F(RewardEvents, CarryStepsStatusesAndVerifiedSpeedups) {
  const auto run = new_run();
  const auto fast = store().add_candidate(candidate_of(run, std::nullopt, "fast"));
  store().record_verdict(verdict_of(fast, 1.8));
  const auto hack = store().add_candidate(candidate_of(run, std::nullopt, "hack"));
  store().record_verdict(verdict_of(hack, 50.0, "rejected"));
  const auto flagged = store().add_candidate(candidate_of(run, std::nullopt, "flagged"));
  auto verdict = verdict_of(flagged, 3.0);
  verdict.verdict["flags"] = {"cached_output"};
  store().record_verdict(verdict);
  store().record_rewards({reward(fast, "ok", 3, 1.79), reward(hack, "rejected", 3, 0.0),
                          reward(std::nullopt, "unparseable", 4, 0.0),
                          reward(flagged, "ok", 4, 3.0), reward(fast, "ok", std::nullopt, 1.79)});
  const auto events = reward_events(store());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].speedup, 1.8);
  EXPECT_EQ(events[0].step, 3);
  EXPECT_EQ(events[0].raw_reward, 1.79);
  EXPECT_EQ(events[0].reward, 1.79 - 1.0);
  EXPECT_EQ(events[1].status, "rejected");
  EXPECT_EQ(events[1].speedup, std::nullopt);
  EXPECT_EQ(events[2].speedup, std::nullopt);
  EXPECT_EQ(events[3].speedup, std::nullopt) << "a reject flag is never a verified speedup";
  EXPECT_EQ(events[4].step, std::nullopt);
  EXPECT_EQ(events[4].speedup, 1.8) << "the same completion again: its verdict's speedup";
  EXPECT_EQ(events[4].request_id, "req");
}

}  // namespace
}  // namespace cudal1::data
