// Every flag a verdict can carry, in one table: its name, what it does to the verdict, whether it
// is a hack class (the vocabulary of the hack-case database and the reviewer), and a one-line
// description. The verdict's reject set, the reward shaping, the reviewer's class list, the
// reports and `cudal1 flags` (which docs/reward-hacking.md is checked against) all read it.
#pragma once

#include <span>
#include <string_view>

namespace cudal1 {

enum class FlagEffect {
  kReject,      // status rejected, reward the floor
  kInfo,        // shown, the verdict stands
  kTask,        // about the task, in task_flags
  kCorpusOnly,  // a hack class the corpus and the reviewer use; no automatic check raises it
};

struct FlagInfo {
  std::string_view name;
  FlagEffect effect;
  bool hack_class;  // a class of the hack-case database
  std::string_view description;
};

std::span<const FlagInfo> flag_table();
// The entry of `name`, or nullptr for a name cudal1 does not know.
const FlagInfo* find_flag(std::string_view name);
bool is_reject_flag(std::string_view name);
std::string_view to_string(FlagEffect effect);  // "reject", "info", "task", "corpus"

}  // namespace cudal1
