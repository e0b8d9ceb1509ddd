// `cudal1 generate`: CUDA-L1's one-shot generation over a suite. Stage 1 collects the variants
// that strong LLMs write for every reference; stage 2 repeats it with the model being trained,
// round after round. Each task of the suite is one optimiser run with one round, no exemplars
// and the one-shot prompt (prompts/generate.md), tagged in the store with its stage, round and
// suite key. Many tasks run at once through one LLM client and one evaluator, their evaluations
// spread over the devices. Everything is recorded as it happens, so the same command (or
// --resume) continues after a kill, and batch mode goes through prompts export / responses import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/evaluator.hpp"
#include "cudal1/llm/client.hpp"
#include "cudal1/review/reward_checker.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::search {

struct GenerateSettings {
  std::string model;
  int samples = 4;  // replies per task
  double temperature = 0.7;
  std::optional<int> max_tokens;
  int round = 0;  // 0: stage 1 (strong LLMs); 1, 2, ...: stage 2's rounds
  // Earlier verified implementations of the task shown per prompt, with their measured speedups
  // and profiles (generate.md's {{#exemplars}}). Unset: none in round 0, 2 in later rounds.
  std::optional<std::size_t> exemplars;
  std::string prompt_profile = "summary";  // none, summary or full (ProfileDetail)
  std::vector<int> levels;                 // every level when empty
  std::size_t limit = 0;                   // the first `limit` tasks (every task when 0)
  nlohmann::json evaluation;               // recorded with every run (OptimizeSettings::evaluation)
};

struct GenerateProgress {
  std::size_t tasks = 0;    // runs of this generation
  std::size_t done = 0;     // runs whose replies are all evaluated, earlier ones included
  std::size_t resumed = 0;  // done before this command started
  std::size_t running = 0;  // runs being driven now
  int requests_in_flight = 0;
  int prompts_waiting = 0;  // not yet answered
  int evaluations_done = 0;
  int evaluations_running = 0;
  long long tokens = 0;
  double elapsed_s = 0;
  std::optional<double> eta_s;  // once a run has finished in this command
};

struct GenerateOutcome {
  std::size_t tasks = 0;
  std::size_t finished = 0;
  std::size_t pending_prompts = 0;  // waiting for replies (batch mode)
  std::string stop_reason;          // "finished", "waiting for batch replies", "incomplete"
  // One per generation directory (OUT/round<K>), as written to its summary.json.
  std::vector<nlohmann::json> summaries;
};

class SuiteGeneration {
 public:
  // `client` is null in batch mode. Each run's directory is OUT/round<K>/<suite key> (the layout
  // of an optimize run directory); evaluations go to the least busy of `devices`.
  SuiteGeneration(Evaluator& evaluator, store::Store& store, std::shared_ptr<llm::LlmClient> client,
                  std::filesystem::path out_dir, std::filesystem::path prompts_dir,
                  EvalOptions eval_options, std::vector<std::string> devices);
  ~SuiteGeneration();

  void on_progress(std::function<void(const GenerateProgress&)> callback);
  void set_reward_checker(std::shared_ptr<const review::RewardChecker> checker);
  // Runs driven at once (each keeps `samples` requests and evaluations going).
  void set_tasks_at_once(std::size_t tasks);

  // A run for every selected task of the suite: a run already recorded for the same task,
  // model and round continues, the others start. Throws InputError for an unusable suite,
  // settings or prompt template; LlmAbort when the LLM cannot be used (after every run in flight
  // has stopped and the summaries are written).
  GenerateOutcome generate(const std::filesystem::path& suite, const GenerateSettings& settings);
  // Continues every unfinished generate run in the store (of `round` when given). Throws
  // InputError when the store holds no generate run (of that round).
  GenerateOutcome resume(std::optional<int> round);

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace cudal1::search
