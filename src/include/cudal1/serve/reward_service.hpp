// Rewards for trainers: each item (a task key and a model's completion, or code) is evaluated by
// the engine in an isolated worker, recorded in the store, turned into a raw reward, smoothed
// with the task's reward history, and given a GRPO advantage within its group. Identical code
// for the same task is evaluated once: an evaluation in flight is shared, a recorded verdict is
// reused (across restarts too). Evaluations run `max_in_flight` at a time, spread over the
// devices; the engine builds on the CPU cores in parallel and times one candidate per GPU.
//
// What a crash can leave in the store: a candidate is written with its verdict, in one
// transaction, once it is evaluated; a request's rewards are written with the answer sent for
// them, in one transaction, once every item has its verdict. A request sent again is answered
// from the store (the same bytes, no new rewards, nothing evaluated): its rewards count once in
// the smoothing history whenever the server was killed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/review/reward_checker.hpp"
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
  // Which queued evaluation starts next: of the task with the fewest running (spreads a GRPO
  // step's groups, so their later samples take the kept references of the earlier ones), or the
  // one queued first (an earlier request's items before a later one's).
  bool start_by_task = true;
  // On several devices: an evaluation goes to the GPU where its task's evaluations are while
  // that GPU has at most this many more in flight than the least busy (DeviceLoad); 0: always
  // the least busy. 8 by default: on four H200s it kept a task's references where its next
  // evaluations ran (bench/results/2026-11-28-levers.md); on one GPU it changes nothing.
  std::size_t task_affinity = 8;
  // The reward checker (CUDA-L1's checking model): every verdict its policy finds suspicious
  // (well above the review threshold or the task's best verified speedup) is reviewed before
  // its reward is final; a "hack" answer rejects it (the floor reward). Without a reviewer the
  // checker still flags such verdicts unreviewed. Null: no review at all.
  std::shared_ptr<const review::RewardChecker> reward_checker;
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
  // The verdict's 95 % interval of the speedup; the raw reward is never above its lower end.
  std::optional<std::pair<double, double>> speedup_ci;
  std::vector<std::string> flags;
  double raw_reward = 0;
  double reward = 0;  // smoothed
  std::optional<double> advantage;
  std::optional<std::int64_t> candidate_id;
  bool cached = false;  // the verdict of an earlier evaluation of the same code
  std::string error;    // why, when the status is not ok
  // The reward checker's part: "hack", "legitimate", "uncertain" (reviewed), "unreviewed" (no
  // reviewer), "failed" (the review did not give an answer); empty for a verdict the policy did
  // not find suspicious.
  std::string review;
};

// What identifies a reward request whatever server process answers it, and what its answer is
// recorded with.
struct RequestIdentity {
  std::string key;       // equal for the same request (RewardServer: its endpoint and body)
  std::string endpoint;  // "/v1/rewards", "/get_reward"
  std::string request_id;
  std::optional<std::int64_t> step;  // the trainer's step, when the request named one
  // How long after its answer the same request is answered from the store; later it is a new
  // request. None: for ever.
  std::optional<double> replay_seconds;
};

struct ServedAnswer {
  std::string body;
  std::vector<RewardResult> results;  // empty when replayed
  bool replayed = false;              // answered before, perhaps by an earlier server process
  std::string answered_at;            // when it was first answered (ISO 8601)
};

class RewardService {
 public:
  RewardService(Evaluator& evaluator, store::Store& store, const TaskCatalog& catalog,
                RewardServiceOptions options, Metrics& metrics);
  // Waits for the evaluations in flight.
  ~RewardService();
  RewardService(const RewardService&) = delete;
  RewardService& operator=(const RewardService&) = delete;

  // The answer to a request: the one recorded under `request.key` if there is one (within
  // `request.replay_seconds`; nothing is then evaluated or recorded), else every item answered in
  // order (blocking until all are evaluated) and the body `reply` makes of the results recorded
  // with their rewards in one transaction. Every item's task must be in the catalog
  // (std::invalid_argument otherwise). Identical requests at once are the caller's to share
  // (RequestReplay): the second to finish would be answered with the first's body, having evaluated
  // for nothing.
  ServedAnswer answer(const std::vector<RewardItem>& items, const RequestIdentity& request,
                      const std::function<std::string(const std::vector<RewardResult>&)>& reply);

  std::size_t queue_depth() const;
  std::size_t evaluations_in_flight() const;
  // The engine's worker pools (Evaluator::worker_pools).
  nlohmann::json worker_pools() const;
  const RewardServiceOptions& options() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::serve
