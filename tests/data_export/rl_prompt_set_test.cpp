// cudal1 data rl: one record per prompt with the fields TRL, OpenRLHF and verl read, the
// prompts built as GET /v1/prompts builds them (the store's verified candidates as exemplars).
#include "cudal1/data/rl_prompt_set.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "../store/store_fixture.hpp"
#include "cudal1/common/sha256.hpp"

namespace cudal1::data {
namespace {

using nlohmann::json;
using store::testing::StoreFixture;

constexpr const char* kTask =
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n";

class RlPromptSet : public StoreFixture {
 protected:
  Suite suite() {
    const auto file = directory_ / "suite" / "level1" / "1_Copy.py";
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << kTask;
    return Suite::load(directory_ / "suite");
  }

  search::PromptService service(const std::string& device_kind = "cpu") {
    search::PromptSettings settings;
    settings.device_kind = device_kind;
    return search::PromptService(store(), search::PromptLibrary::load(CUDAL1_PROMPTS_DIR),
                                 settings);
  }

  // A verified candidate of the task, measured on the CPU, in a run of its own.
  std::int64_t verified(double speedup) {
    const auto task = store().upsert_task("/suite/level1/1_Copy.py", kTask);
    store::RunRecord run;
    run.task_id = task.id;
    run.model = "m";
    run.llm = "batch";
    run.options = {{"stage", "generate"}, {"device", "cpu"}};
    const auto run_id = store().create_run(run);
    const auto id =
        store().add_candidate(candidate_of(run_id, std::nullopt, "class ModelNew: fast"));
    store().record_verdict(verdict_of(id, speedup));
    return id;
  }
};

TEST_F(RlPromptSet, RecordsCarryThePromptAndTheTaskForEveryTrainer) {
  auto prompts = service();
  const auto records = rl_prompt_records(suite(), prompts, 3, 7);
  ASSERT_EQ(records.size(), 3u);
  for (std::size_t i = 0; i < records.size(); ++i) {
    const json& r = records[i];
    EXPECT_EQ(r["task"], "level1/1_Copy");
    EXPECT_EQ(r["label"], "level1/1_Copy");
    ASSERT_EQ(r["prompt"].size(), 2u);
    EXPECT_EQ(r["prompt"][0]["role"], "system");
    EXPECT_EQ(r["prompt"][1]["role"], "user");
    EXPECT_NE(r["prompt"][1]["content"].get<std::string>().find("return x"), std::string::npos)
        << "the reference is in the prompt";
    EXPECT_EQ(r["data_source"], kDataSource);
    EXPECT_EQ(r["ability"], "cuda");
    EXPECT_EQ(r["reward_model"], json({{"style", "rule"}, {"ground_truth", "level1/1_Copy"}}));
    EXPECT_EQ(r["extra_info"]["index"], i);
    EXPECT_EQ(r["extra_info"]["prompt_index"], i);
    EXPECT_EQ(r["extra_info"]["split"], "train");
    EXPECT_EQ(r["pool"], 1) << "an empty store: the reference alone";
    ASSERT_EQ(r["exemplars"].size(), 1u);
    EXPECT_EQ(r["exemplars"][0]["reference"], true);
  }
}

TEST_F(RlPromptSet, PromptsShowTheStoresVerifiedCandidatesAsTheServerWould) {
  const auto id = verified(1.84);
  auto prompts = service();
  const auto records = rl_prompt_records(suite(), prompts, 2, 0);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["pool"], 2);
  bool shown = false;
  for (const auto& r : records) {
    for (const auto& e : r["exemplars"]) shown = shown || e["candidate_id"] == id;
  }
  EXPECT_TRUE(shown) << "the verified candidate is an exemplar";
  EXPECT_NE(records[0]["prompt"][1]["content"].get<std::string>().find("speedup 1.84x"),
            std::string::npos);
  // The same store, seed and settings give the same records (what the server answers too).
  auto again = service();
  const search::PromptTask task{"level1/1_Copy", "1_Copy", kTask, sha256_hex(kTask)};
  EXPECT_EQ(again.prompts(task, 2, 0)["prompts"][1]["messages"], records[1]["prompt"]);
  // Measurements of another kind of device are not shown.
  auto gpu = service("cuda");
  EXPECT_EQ(rl_prompt_records(suite(), gpu, 1, 0)[0]["pool"], 1);
}

}  // namespace
}  // namespace cudal1::data
