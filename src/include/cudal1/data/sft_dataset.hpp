// CUDA-L1's fine-tuning data (stages 1 and 2): the verified replies in the store as chat records
// `{"messages": [system, user, assistant]}`, the layout TRL's SFTTrainer and OpenRLHF's SFT read.
// The user turn is exactly the prompt the model saw, the assistant turn exactly its reply
// (analysis and code as it answered); each record names the candidate, run and verdict it came
// from. A reply qualifies when its verdict is ok, timed, and carries no reject flag and no
// `unreviewed` flag; among replies of one task with the same code (SHA-256) the fastest is kept.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/store/store.hpp"

namespace cudal1::data {

struct SftFilter {
  std::string stage = "all";  // "generate", "optimize" or "all" (both)
  std::optional<int> round;   // only generate runs tagged with this round
  std::vector<int> levels;    // only tasks of these suite levels (every task when empty)
  std::optional<double> min_speedup;
};

// Why replies were left out, for the command's closing line.
struct SftCounts {
  std::size_t replies = 0;     // replies of the selected runs
  std::size_t records = 0;     // written
  std::size_t not_ok = 0;      // unparseable, incorrect, failed, ...
  std::size_t flagged = 0;     // ok but with a reject or unreviewed flag
  std::size_t too_slow = 0;    // under --min-speedup
  std::size_t duplicates = 0;  // same code as a kept (faster or earlier) reply of the task
};

struct SftDataset {
  std::vector<nlohmann::json> records;  // by task, then candidate id
  SftCounts counts;
};

// Throws std::invalid_argument for an unknown stage.
SftDataset sft_dataset(store::Store& store, const SftFilter& filter);

// The suite key a run records for its task ("level1/3_GeluTanh"), else the task file's path.
std::string task_key_of(const store::RunRecord& run, const store::TaskRecord& task);
// The level of a suite key ("level2/..." -> 2); nullopt for a key of another form.
std::optional<int> level_of_key(const std::string& key);

}  // namespace cudal1::data
