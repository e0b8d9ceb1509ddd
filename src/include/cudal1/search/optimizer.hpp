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

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/llm/client.hpp"
#include "cudal1/review/reward_checker.hpp"
#include "cudal1/search/exemplar_sampler.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::search {

struct OptimizeSettings {
  std::string model;
  int rounds = 3;
  int samples = 4;            // LLM replies per round
  std::size_t exemplars = 2;  // earlier implementations per prompt
  double temperature = 0.7;
  std::optional<int> max_tokens;
  std::optional<long long> budget_tokens;  // stop sending requests once this many are used
  std::string sampler = "bucket";
  SamplerOptions sampler_options;
  int show_failures = 1;   // recent failed attempts shown in a prompt, with their error
  std::uint64_t seed = 0;  // exemplar sampling

  nlohmann::json to_json() const;
  static OptimizeSettings from_json(const nlohmann::json& json);
};

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
  // `client` is null in batch mode: prompts are then left for `cudal1 prompts export`.
  Optimizer(Evaluator& evaluator, store::Store& store, std::unique_ptr<llm::LlmClient> client,
            std::filesystem::path out_dir, std::filesystem::path prompts_dir,
            EvalOptions eval_options);
  ~Optimizer();

  // Starts a new run. Throws InputError for an unusable task or settings.
  OptimizeOutcome start(const std::filesystem::path& task, const OptimizeSettings& settings);
  // Continues a recorded run: prompts never answered are sent (or left for batch export),
  // replies not yet parsed are parsed, candidates not yet evaluated are evaluated.
  OptimizeOutcome resume(std::int64_t run_id);

  void on_progress(std::function<void(const OptimizeProgress&)> callback);
  // Suspicious verdicts are reviewed before they are recorded; the best known speedup is the
  // best verified one of the task's pool (the reference at 1.00 included; verdicts flagged
  // unreviewed left out).
  void set_reward_checker(std::shared_ptr<const review::RewardChecker> checker);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::search
