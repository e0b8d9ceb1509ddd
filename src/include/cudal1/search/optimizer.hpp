// The contrastive optimisation loop (`cudal1 optimize`): each round, sample exemplars from the
// pool of verified candidates, prompt the LLM with them and their measured speedups, parse the
// replies, evaluate the new candidates, and grow the pool. Requests are in flight while earlier
// candidates build and run. Everything is recorded in the store as it happens, so a run that is
// killed resumes where it stopped, and a run can proceed in rounds through batch files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/evaluator.hpp"
#include "cudal1/llm/client.hpp"
#include "cudal1/review/reward_checker.hpp"
#include "cudal1/search/optimize_settings.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::search {

struct OptimizeProgress {
  int round = 0;
  int rounds = 0;
  int requests_in_flight = 0;
  int prompts_waiting = 0;  // not yet answered
  int evaluations_done = 0;
  int evaluations_running = 0;
  std::optional<double> best_speedup;
  long long tokens = 0;
};

struct OptimizeOutcome {
  std::int64_t run_id = 0;
  bool finished = false;    // every round done (or the token budget reached)
  int pending_prompts = 0;  // waiting for replies (batch mode)
  std::string stop_reason;  // "finished", "token budget reached", "waiting for batch replies"
  nlohmann::json summary;   // as written to DIR/summary.json
};

class LlmAbort : public std::runtime_error {  // the LLM cannot be used (auth, bad URL, unreachable)
 public:
  using std::runtime_error::runtime_error;
};

class Optimizer {
 public:
  // `client` is null in batch mode: prompts are then left for `cudal1 prompts export`. Runs
  // of many tasks may share one client (and its bound on requests in flight).
  Optimizer(Evaluator& evaluator, store::Store& store, std::shared_ptr<llm::LlmClient> client,
            std::filesystem::path out_dir, std::filesystem::path prompts_dir,
            EvalOptions eval_options);
  ~Optimizer();

  // Starts a new run. Throws InputError for an unusable task or settings.
  OptimizeOutcome start(const std::filesystem::path& task, const OptimizeSettings& settings);
  // Records a new run of a task that is already checked and stored, without driving it:
  // resume() starts it. Throws InputError for unusable settings.
  std::int64_t create(const store::TaskRecord& task, const OptimizeSettings& settings);
  // Continues a recorded run: prompts never answered are sent (or left for batch export),
  // replies not yet parsed are parsed, candidates not yet evaluated are evaluated.
  OptimizeOutcome resume(std::int64_t run_id);

  void on_progress(std::function<void(const OptimizeProgress&)> callback);
  // Suspicious verdicts are reviewed before they are recorded; the best known speedup is the
  // best verified one of the task's pool (the reference at 1.00 included; verdicts flagged
  // unreviewed left out).
  void set_reward_checker(std::shared_ptr<const review::RewardChecker> checker);
  // Each evaluation goes to the least busy of these devices (shared by the runs of a suite)
  // instead of the run's own device.
  void spread_over(std::shared_ptr<DeviceLoad> devices);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::search
