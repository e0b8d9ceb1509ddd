// Rewards for trainers: each item (a task key and a model's completion, or code) is evaluated by
// the engine in an isolated worker, recorded in the store, turned into a raw reward, smoothed
// with the task's reward history, and given a GRPO advantage within its group. Identical code
// for the same task is evaluated once: an evaluation in flight is shared, a recorded verdict is
// reused (across restarts too). Evaluations run `max_in_flight` at a time, spread over the
// devices; the engine builds on the CPU cores in parallel and times one candidate per GPU.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/rl/reward_shaping.hpp"
#include "cudal1/search/prompt_service.hpp"
#include "cudal1/serve/metrics.hpp"
#include "cudal1/serve/task_catalog.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::serve {

struct RewardServiceOptions {
  std::vector<std::string> devices = {"cpu"};  // "cpu", or GPUs such as "cuda:0", "cuda:1"
  EvalOptions eval;                            // its device is chosen per evaluation
  rl::RewardPolicy policy;
  std::filesystem::path work_dir = "cudal1-serve";  // candidate files
  // Where rejected completions are added as hack cases (the hack-case database); empty: nowhere.
  std::filesystem::path hacks_dir;
  std::size_t max_in_flight = 4;  // evaluations at once
};

struct RewardItem {
  std::string task;                       // a key of the catalog
  std::optional<std::string> completion;  // a model's reply (the code is parsed out of it)
  std::optional<std::string> code;        // or the code itself
  std::optional<std::string> group;       // GRPO group
  // Set when the caller already knows there is no code (e.g. a query without its prompt): the
  // item is answered as unparseable with this reason.
  std::string unusable;
};

struct RewardResult {
  std::string task;
  std::string status;  // a verdict status, "unparseable" for a completion without code
  std::optional<double> speedup;
  std::vector<std::string> flags;
  double raw_reward = 0;
  double reward = 0;  // smoothed
  std::optional<double> advantage;
  std::optional<std::int64_t> candidate_id;
  bool cached = false;  // the verdict of an earlier evaluation of the same code
  std::string error;    // why, when the status is not ok
};

class RewardService {
 public:
  RewardService(Evaluator& evaluator, store::Store& store, const TaskCatalog& catalog,
                RewardServiceOptions options, Metrics& metrics);
  // Waits for the evaluations in flight.
  ~RewardService();
  RewardService(const RewardService&) = delete;
  RewardService& operator=(const RewardService&) = delete;

  // Answers every item, in order; blocks until all are evaluated. Every item's task must be in
  // the catalog (std::invalid_argument otherwise). The rewards are recorded under `request_id`
  // (and the trainer's `step`, when given) in one transaction.
  std::vector<RewardResult> score(const std::vector<RewardItem>& items,
                                  const std::string& request_id, std::optional<std::int64_t> step);

  std::size_t queue_depth() const;
  std::size_t evaluations_in_flight() const;
  const RewardServiceOptions& options() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

using search::device_kind;

}  // namespace cudal1::serve
