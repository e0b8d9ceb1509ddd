// CUDA-L1's stage-3 prompt set: contrastive prompts for every task of a suite, built exactly as
// `GET /v1/prompts` of cudal1 serve builds them (search::PromptService), each record carrying its
// task key as the label the reward server needs. One record satisfies the trainers at once:
// `prompt` (chat messages) for TRL, OpenRLHF (--input_key prompt --apply_chat_template) and verl,
// `task`/`label` for TRL's reward function and OpenRLHF's --label_key, and verl's RLHFDataset
// fields (data_source, ability, reward_model.ground_truth, extra_info).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "cudal1/search/prompt_service.hpp"
#include "cudal1/task/suite.hpp"

namespace cudal1::data {

// verl picks a reward function by data_source; ours is the custom one
// (integrations/verl_reward.py).
inline constexpr const char* kDataSource = "cudal1";

// `per_task` prompts for each task of `suite`, in the suite's order; prompt i of every task draws
// its exemplars with seed + i (as GET /v1/prompts does). Throws InputError naming the file of a
// task that cannot be read.
std::vector<nlohmann::json> rl_prompt_records(const Suite& suite, search::PromptService& prompts,
                                              int per_task, std::uint64_t seed);

}  // namespace cudal1::data
