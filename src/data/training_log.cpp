#include "cudal1/data/training_log.hpp"

#include <algorithm>
#include <map>

#include "cudal1/eval/verdict.hpp"

namespace cudal1::data {
namespace {

std::optional<double> verified_speedup(const std::optional<store::VerdictRecord>& v) {
  if (!v || !v->outline().trusted()) return std::nullopt;
  return v->speedup;
}

}  // namespace

std::vector<report::RewardEvent> reward_events(store::Store& store) {
  std::vector<report::RewardEvent> events;
  // A completion given again (the same code) has one verdict: looked up once.
  std::map<std::int64_t, std::optional<double>> speedups;
  for (const auto& r : store.rewards()) {
    report::RewardEvent e;
    e.task = r.task_key;
    e.step = r.step;
    e.request_id = r.request_id;
    e.status = r.status;
    e.raw_reward = r.raw_reward;
    e.reward = r.reward;
    if (r.candidate_id) {
      auto it = speedups.find(*r.candidate_id);
      if (it == speedups.end())
        it = speedups.emplace(*r.candidate_id, verified_speedup(store.verdict(*r.candidate_id)))
                 .first;
      // The reward's own status decides: a cached verdict is the same, an engine failure is not.
      e.speedup = r.status == "ok" ? it->second : std::nullopt;
    }
    events.push_back(std::move(e));
  }
  return events;
}

}  // namespace cudal1::data
