// CUDA-L1's fine-tuning data (stages 1 and 2): the verified replies in the store as chat records
// `{"messages": [system, user, assistant]}`, the layout TRL's SFTTrainer and OpenRLHF's SFT read.
// The user turn is exactly the prompt the model saw, the assistant turn exactly its reply
// (analysis and code as it answered); each record names the candidate, run and verdict it came
// from. A reply qualifies when its verdict is ok, timed, and carries no reject flag and no
// `unreviewed` flag (unless include_unreviewed keeps those, marked "unreviewed": true); among
// replies of one task with the same code (SHA-256) the fastest is kept. Every reply left out is
// counted under its reason, each with a remedy for people (left_out_reasons()).
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cudal1/store/store.hpp"

namespace cudal1::data {

struct SftFilter {
  std::string stage = "all";  // "generate", "optimize" or "all" (both)
  std::optional<int> round;   // only generate runs tagged with this round
  std::vector<int> levels;    // only tasks of these suite levels (every task when empty)
  std::optional<double> min_speedup;
  bool include_unreviewed = false;  // keep ok replies flagged unreviewed, marked in the record
};

// Why a reply was left out, in the order a summary lists them.
struct LeftOutReason {
  std::string_view name;    // "unreviewed", "incorrect", ...
  std::string_view why;     // what the replies were
  std::string_view remedy;  // what changes it, for people ("" when nothing does)
};
// unreviewed, rejected, incorrect, failed, unparseable, no_reply, below_min_speedup, duplicate.
std::span<const LeftOutReason> left_out_reasons();

// What was written and why the rest was left out, for the command's closing lines.
struct SftCounts {
  std::size_t replies = 0;              // replies of the selected runs
  std::size_t records = 0;              // written
  std::size_t included_unreviewed = 0;  // records kept by include_unreviewed
  // Replies left out, by a name of left_out_reasons(); only reasons that occurred.
  std::map<std::string, std::size_t> left_out;

  std::size_t count(std::string_view reason) const;
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
