#include "cudal1/data/rl_prompt_set.hpp"

#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::data {

std::vector<nlohmann::json> rl_prompt_records(const Suite& suite, search::PromptService& prompts,
                                              int per_task, std::uint64_t seed) {
  std::vector<nlohmann::json> records;
  for (const auto& task : suite.tasks) {
    search::PromptTask shown;
    shown.key = task.key();
    shown.name = task.name;
    shown.source = read_source_file(task.file, "task");
    shown.source_sha256 = sha256_hex(shown.source);
    const nlohmann::json answer = prompts.prompts(shown, per_task, seed);
    int index = 0;
    for (const auto& prompt : answer["prompts"]) {
      records.push_back({{"prompt", prompt["messages"]},
                         {"task", shown.key},
                         {"label", shown.key},
                         {"exemplars", prompt["exemplars"]},
                         {"pool", answer["pool"]},
                         {"data_source", kDataSource},
                         {"ability", "cuda"},
                         {"reward_model", {{"style", "rule"}, {"ground_truth", shown.key}}},
                         {"extra_info",
                          {{"split", "train"},
                           {"index", records.size()},
                           {"task", shown.key},
                           {"prompt_index", index}}}});
      ++index;
    }
  }
  return records;
}

}  // namespace cudal1::data
