// The settings of one optimisation run, recorded as the run's options in the store so that a
// resumed run continues exactly as it started. The stage tags say which of CUDA-L1's training
// stages produced the run, so dataset exports can select by them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/search/exemplar_sampler.hpp"

namespace cudal1::search {

// Stages a run records (options.stage): `cudal1 optimize` runs, `cudal1 generate` runs (stage 1
// and the rounds of stage 2), and the runs `cudal1 serve` keeps its trainers' completions in.
inline constexpr const char* kStageOptimize = "optimize";
inline constexpr const char* kStageGenerate = "generate";
inline constexpr const char* kStageRl = "rl";

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
  int show_failures = 1;  // recent failed attempts shown in a prompt, with their error
  std::string prompt_profile = "summary";  // none, summary or full (ProfileDetail)
  std::uint64_t seed = 0;                  // exemplar sampling
  // The user message's template in the prompts directory: the contrastive prompt, or the
  // one-shot prompt of `cudal1 generate` (generate.md).
  std::string prompt_template = "contrastive.md";
  // Stage tags: kStageOptimize or kStageGenerate; a generate run's round (0: stage 1's data from
  // strong LLMs, 1, 2, ...: stage 2's self-supervised rounds) and its task's suite key.
  std::string stage = kStageOptimize;
  std::optional<int> stage_round;
  std::string suite_key;
  // How the run's candidates are evaluated (device, tolerance, time budget, trials, timing), as
  // the command that started it gave them: a resumed run evaluates the same way unless told
  // otherwise. Null in runs recorded before it was kept.
  nlohmann::json evaluation;

  // Throws InputError for settings no run can use (no model, no rounds or samples, an unknown
  // sampler).
  void check() const;
  nlohmann::json to_json() const;
  static OptimizeSettings from_json(const nlohmann::json& json);
};

// The stage of a recorded run from its options and its LLM: runs recorded before stages were
// tagged are `optimize` runs, or `rl` runs when `cudal1 serve` made them (llm "serve").
std::string stage_of_run(const nlohmann::json& options, const std::string& llm);

}  // namespace cudal1::search
