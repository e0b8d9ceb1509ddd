// Contrastive prompts for a trainer (GET /v1/prompts of cudal1 serve, cudal1 data rl): the
// task's reference and earlier verified implementations with their measured speedups, drawn by
// the optimiser's exemplar sampler from everything the store holds for the task (a reward
// server's rewards, optimize and generate runs on the same kind of device), so the prompts carry
// reward information that improves as training goes (CUDA-L1's stage 3).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/tolerance.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/exemplar_sampler.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::search {

// A task as prompts name and show it.
struct PromptTask {
  std::string key;   // the suite key, "level1/3_GeluTanh"
  std::string name;  // "3_GeluTanh"
  std::string source;
  std::string source_sha256;
};

struct PromptSettings {
  std::size_t exemplars = 2;  // earlier implementations per prompt
  std::string sampler = "bucket";
  SamplerOptions sampler_options;
  int show_failures = 1;                   // recent failed attempts shown, with their error
  std::string prompt_profile = "summary";  // none, summary or full (ProfileDetail)
  std::string device_kind = "cpu";         // "cpu" or "cuda": whose measurements are shown
  Tolerance tolerance;
};

class PromptService {
 public:
  // Throws std::invalid_argument for an unknown sampler.
  PromptService(store::Store& store, PromptLibrary library, PromptSettings settings);

  // {"task": KEY, "prompts": [{"messages": [{"role", "content"}...], "exemplars": [{
  // "candidate_id", "speedup", "reference"}...]}...], "pool": N} with `n` prompts, exemplars
  // drawn with a generator seeded by `seed` (prompt i uses seed + i).
  nlohmann::json prompts(const PromptTask& task, int n, std::uint64_t seed);

 private:
  store::Store& store_;
  PromptLibrary library_;
  PromptSettings settings_;
};

}  // namespace cudal1::search
