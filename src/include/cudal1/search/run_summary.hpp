// What an optimisation run has found so far, read back from the store (summary.json, reports).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cudal1/store/store.hpp"

namespace cudal1::search {

struct BestCandidate {
  std::optional<store::CandidateRecord> candidate;  // none while no generated candidate is ok
  std::optional<double> speedup;
  std::string status;
};

// The fastest generated candidate whose verdict is "ok" (earliest on ties).
BestCandidate best_generated(store::Store& store, std::int64_t run_id);

// run_id, task, model, llm, rounds (started) and rounds_planned, candidates, evaluations,
// prompt_tokens, completion_tokens, best_speedup, best_status, best_candidate_id, statuses
// (count per verdict status), per_round (prompts, answered, failed, best speedup so far),
// pending_prompts.
nlohmann::json summarize_run(store::Store& store, std::int64_t run_id);

// candidates.jsonl: one JSON line per generated (or unparseable) candidate that has a verdict, by
// id: id, round, prompt_id, kind, status, speedup, speedup_ci, reward, flags, error, analysis
// (the model's performance analysis), code, duplicate_of. `cudal1 report` reads it.
std::string candidate_lines(store::Store& store, std::int64_t run_id);

}  // namespace cudal1::search
