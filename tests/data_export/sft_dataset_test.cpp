// cudal1 data sft: which replies become records (verified, unflagged, deduplicated, filtered),
// what a record holds (the exact conversation, where it came from) and in which order.
#include "cudal1/data/sft_dataset.hpp"

#include <gtest/gtest.h>

#include <set>

#include "../store/store_fixture.hpp"

namespace cudal1::data {
namespace {

using nlohmann::json;
using store::testing::StoreFixture;

class SftDataset : public StoreFixture {
 protected:
  // A run of `cudal1 generate` (stage tags) or, with an empty key, of `cudal1 optimize` made
  // before runs were tagged.
  std::int64_t run_of(const std::string& suite_key, std::optional<int> round = 0,
                      const std::string& task_source = "class Model: pass\n") {
    const auto task = store().upsert_task(
        suite_key.empty() ? "/tasks/task.py" : "/suite/" + suite_key + ".py", task_source);
    store::RunRecord run;
    run.task_id = task.id;
    run.model = "m";
    run.llm = "batch";
    if (!suite_key.empty()) {
      run.options = {{"stage", "generate"}, {"suite_key", suite_key}, {"rounds", 1}};
      if (round) run.options["round"] = *round;
    } else {
      run.options = {{"rounds", 3}};
    }
    return store().create_run(run);
  }

  // A reply in `run` whose code is `code`, evaluated with `status` and `speedup` (and `flags`).
  std::int64_t reply(std::int64_t run, const std::string& code, std::optional<double> speedup,
                     const std::string& status = "ok", std::vector<std::string> flags = {},
                     const std::string& kind = "generated") {
    const int sample = next_sample_++;
    store::PromptRecord prompt;
    prompt.run_id = run;
    prompt.round = 1;
    prompt.sample = sample;
    prompt.request = {{"model", "m"},
                      {"messages",
                       {{{"role", "system"}, {"content", "you write kernels"}},
                        {{"role", "user"}, {"content", "prompt " + std::to_string(sample)}}}}};
    const auto added = store().add_prompt(prompt);
    store().record_response(
        response_to(added.id, 10, 5, "## Performance Analysis\nreply " + std::to_string(sample)));
    const auto candidate = store().add_candidate(candidate_of(run, added.id, code, kind));
    auto verdict = verdict_of(candidate, speedup, status);
    verdict.verdict["flags"] = flags;
    verdict.verdict["speedup_ci"] = {0.9, 1.1};
    verdict.verdict["log"] = "a long compiler log";
    store().record_verdict(verdict);
    return candidate;
  }

  int next_sample_ = 0;
};

TEST_F(SftDataset, RecordIsTheExactConversationWithItsProvenance) {
  const auto run = run_of("level1/1_Relu", 0);
  const auto id = reply(run, "class ModelNew: pass\n", 1.5);
  const auto dataset = sft_dataset(store(), {});
  ASSERT_EQ(dataset.records.size(), 1u);
  const json& r = dataset.records[0];
  ASSERT_EQ(r["messages"].size(), 3u);
  EXPECT_EQ(r["messages"][0], json({{"role", "system"}, {"content", "you write kernels"}}));
  EXPECT_EQ(r["messages"][1], json({{"role", "user"}, {"content", "prompt 0"}}));
  EXPECT_EQ(r["messages"][2],
            json({{"role", "assistant"}, {"content", "## Performance Analysis\nreply 0"}}));
  EXPECT_EQ(r["task"], "level1/1_Relu");
  EXPECT_EQ(r["candidate_id"], id);
  EXPECT_EQ(r["run_id"], run);
  EXPECT_EQ(r["stage"], "generate");
  EXPECT_EQ(r["round"], 0);
  EXPECT_EQ(r["model"], "m");
  EXPECT_EQ(r["speedup"], 1.5);
  EXPECT_EQ(r["verdict"]["status"], "ok");
  EXPECT_EQ(r["verdict"]["speedup_ci"], json({0.9, 1.1}));
  EXPECT_EQ(r["verdict"]["flags"], json::array());
  EXPECT_FALSE(r["verdict"].contains("log")) << "logs stay in the store";
  EXPECT_EQ(r["code_sha256"].get<std::string>().size(), 64u);
  EXPECT_EQ(dataset.counts.records, 1u);
  EXPECT_EQ(dataset.counts.replies, 1u);
}

TEST_F(SftDataset, OnlyVerifiedUnflaggedRepliesAreKept) {
  const auto run = run_of("level1/1_Relu", 0);
  const auto kept = reply(run, "ok code\n", 1.2);
  reply(run, "slower but correct\n", 0.8);
  reply(run, "wrong\n", std::nullopt, "incorrect");
  reply(run, "", std::nullopt, "unparseable", {}, "unparseable");
  reply(run, "cached\n", 40.0, "rejected", {"cached_output"});
  reply(run, "ok with a reject flag\n", 3.0, "ok", {"tampering"});
  reply(run, "never reviewed\n", 9.0, "ok", {"unreviewed"});
  reply(run, "noisy but fine\n", 1.1, "ok", {"noisy", "extra_streams"});
  const auto dataset = sft_dataset(store(), {});
  std::vector<std::int64_t> ids;
  for (const auto& r : dataset.records) ids.push_back(r["candidate_id"]);
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.front(), kept);
  EXPECT_EQ(dataset.counts.replies, 8u);
  // Every reply left out is counted under one reason.
  EXPECT_EQ(dataset.counts.left_out,
            (std::map<std::string, std::size_t>{
                {"incorrect", 1}, {"unparseable", 1}, {"rejected", 2}, {"unreviewed", 1}}));
  EXPECT_EQ(dataset.counts.count("rejected"), 2u);  // cached_output, and an older ok + tampering
  EXPECT_EQ(dataset.counts.count("duplicate"), 0u);
  EXPECT_EQ(dataset.counts.included_unreviewed, 0u);
  for (const auto& r : dataset.records) EXPECT_EQ(r["unreviewed"], false);
  // A slower-than-reference reply is still a correct variant (stage 1 keeps those).
  SftFilter faster;
  faster.min_speedup = 1.0;
  const auto fast = sft_dataset(store(), faster);
  EXPECT_EQ(fast.records.size(), 2u);
  EXPECT_EQ(fast.counts.count("below_min_speedup"), 1u);
}

TEST_F(SftDataset, IncludeUnreviewedKeepsThemMarked) {
  const auto run = run_of("level1/1_Relu", 0);
  reply(run, "ok code\n", 1.2);
  const auto suspicious = reply(run, "never reviewed\n", 437.0, "ok", {"unreviewed"});
  reply(run, "caught\n", 40.0, "rejected", {"review_rejected", "unreviewed"});
  SftFilter filter;
  filter.include_unreviewed = true;
  const auto dataset = sft_dataset(store(), filter);
  ASSERT_EQ(dataset.records.size(), 2u);
  EXPECT_EQ(dataset.records[1]["candidate_id"], suspicious);
  EXPECT_EQ(dataset.records[1]["unreviewed"], true);
  EXPECT_EQ(dataset.records[1]["verdict"]["flags"], json({"unreviewed"}));
  EXPECT_EQ(dataset.records[0]["unreviewed"], false);
  EXPECT_EQ(dataset.counts.included_unreviewed, 1u);
  EXPECT_EQ(dataset.counts.left_out, (std::map<std::string, std::size_t>{{"rejected", 1}}));
}

TEST_F(SftDataset, EveryReasonHasADescription) {
  std::set<std::string_view> names;
  for (const auto& reason : left_out_reasons()) {
    EXPECT_FALSE(reason.why.empty()) << reason.name;
    EXPECT_TRUE(names.insert(reason.name).second) << reason.name;
  }
  for (const char* name : {"unreviewed", "rejected", "incorrect", "failed", "unparseable",
                           "no_reply", "below_min_speedup", "duplicate"})
    EXPECT_TRUE(names.count(name)) << name;
}

TEST_F(SftDataset, SameCodeOfOneTaskKeepsTheFastestReply) {
  const auto a = run_of("level1/1_Relu", 0);
  const auto b = run_of("level1/1_Relu", 1);
  reply(a, "same code\n", 1.2);
  const auto fastest = reply(b, "same code\n", 1.5);
  reply(a, "same code\n", 1.3);
  // Equal speedups: the earlier reply.
  const auto earlier = reply(a, "tie\n", 2.0);
  reply(b, "tie\n", 2.0);
  // The same code for another task is another record.
  const auto other = reply(run_of("level1/2_Gelu", 0, "class Model: gelu\n"), "same code\n", 1.1);
  const auto dataset = sft_dataset(store(), {});
  ASSERT_EQ(dataset.records.size(), 3u);
  EXPECT_EQ(dataset.counts.count("duplicate"), 3u);
  EXPECT_EQ(dataset.records[0]["candidate_id"], fastest);
  EXPECT_EQ(dataset.records[0]["speedup"], 1.5);
  EXPECT_EQ(dataset.records[1]["candidate_id"], earlier);
  EXPECT_EQ(dataset.records[2]["candidate_id"], other);
}

SftFilter select(const std::string& stage, std::optional<int> round = std::nullopt,
                 std::vector<int> levels = {}) {
  SftFilter filter;
  filter.stage = stage;
  filter.round = round;
  filter.levels = std::move(levels);
  return filter;
}

TEST_F(SftDataset, StageRoundAndLevelFiltersSelectRuns) {
  const auto stage1 = run_of("level1/1_Relu", 0);
  const auto round1 = run_of("level1/1_Relu", 1);
  const auto level2 = run_of("level2/7_Fused", 1, "class Model: fused\n");
  const auto optimize = run_of("");  // untagged: an optimize run
  reply(stage1, "a\n", 1.1);
  reply(round1, "b\n", 1.2);
  reply(level2, "c\n", 1.3);
  reply(optimize, "d\n", 1.4);
  const auto runs_of = [&](SftFilter filter) {
    std::vector<std::int64_t> runs;
    for (const auto& r : sft_dataset(store(), filter).records) runs.push_back(r["run_id"]);
    return runs;
  };
  EXPECT_EQ(runs_of({}), (std::vector<std::int64_t>{optimize, stage1, round1, level2}))
      << "ordered by task key (a path sorts before levelN/...), then candidate";
  EXPECT_EQ(runs_of(select("generate")), (std::vector<std::int64_t>{stage1, round1, level2}));
  EXPECT_EQ(runs_of(select("optimize")), (std::vector<std::int64_t>{optimize}));
  EXPECT_EQ(runs_of(select("all", 1)), (std::vector<std::int64_t>{round1, level2}));
  EXPECT_EQ(runs_of(select("all", 0)), (std::vector<std::int64_t>{stage1}));
  EXPECT_EQ(runs_of(select("all", std::nullopt, {2})), (std::vector<std::int64_t>{level2}));
  const auto optimize_record = sft_dataset(store(), select("optimize")).records.at(0);
  EXPECT_EQ(optimize_record["stage"], "optimize");
  EXPECT_TRUE(optimize_record["round"].is_null());
  EXPECT_EQ(optimize_record["task"], "/tasks/task.py") << "no suite key: the task's path";
  EXPECT_THROW(sft_dataset(store(), select("rl")), std::invalid_argument);
}

TEST_F(SftDataset, ServeRunsAndReferencesGiveNoRecords) {
  const auto task = store().upsert_task("/suite/level1/1_Relu.py", "class Model: pass\n");
  store::RunRecord serve;
  serve.task_id = task.id;
  serve.model = "trainer";
  serve.llm = "serve";
  serve.options = {{"serve", true}, {"device", "cpu"}};
  const auto run = store().create_run(serve);
  // A trainer's completion: a candidate without a prompt.
  const auto id = store().add_candidate(candidate_of(run, std::nullopt, "fast\n"));
  store().record_verdict(verdict_of(id, 2.0));
  const auto reference = store().add_candidate(
      candidate_of(run_of("level1/1_Relu"), std::nullopt, "ref", "reference"));
  store().record_verdict(verdict_of(reference, 1.0));
  const auto dataset = sft_dataset(store(), {});
  EXPECT_TRUE(dataset.records.empty());
  EXPECT_EQ(dataset.counts.replies, 0u);
}

TEST(SuiteKeys, LevelOfKey) {
  EXPECT_EQ(level_of_key("level1/3_GeluTanh"), 1);
  EXPECT_EQ(level_of_key("level12/1_X"), 12);
  EXPECT_EQ(level_of_key("/abs/task.py"), std::nullopt);
  EXPECT_EQ(level_of_key("levelx/1_X"), std::nullopt);
}

}  // namespace
}  // namespace cudal1::data
