#include "cudal1/bench/summary.hpp"

#include <gtest/gtest.h>

#include "cudal1/bench/result_line.hpp"
#include "cudal1/eval/tolerance.hpp"
#include "scratch.hpp"

namespace cudal1::bench {
namespace {

using nlohmann::json;

SuiteTask task(int level, int id) {
  return {{level, id},
          std::to_string(id) + "_T",
          "/suite/level" + std::to_string(level) + "/" + std::to_string(id) + "_T.py"};
}

Verdict verdict(Status status, std::optional<double> speedup,
                std::vector<std::string> task_flags = {}) {
  Verdict v;
  v.status = status;
  v.correct = status == Status::kOk || status == Status::kRejected;
  v.speedup = speedup;
  if (speedup) {
    v.reference_ms = 1.0;
    v.candidate_ms = 1.0 / *speedup;
  }
  v.task_flags = std::move(task_flags);
  v.device = {{"name", "NVIDIA H200"}, {"uuid", "GPU-1"}, {"index", "cuda:0"}};
  return v;
}

json line(int level, int id, const Verdict& v, const json& compile) {
  json baselines = {{"eager", baseline_entry(v)}, {"compile", compile}};
  return result_line(task(level, id), {"/out/solutions/x.py", "abc"}, v, baselines);
}

TEST(SummaryTest, StatisticsPerLevelRejectedDegenerateAndBaselines) {
  Verdict rejected = verdict(Status::kRejected, 9.0);
  rejected.flags = {"cached_output"};
  const std::vector<json> lines = {
      line(1, 1, verdict(Status::kOk, 2.0), baseline_entry(verdict(Status::kOk, 1.5))),
      line(1, 2, verdict(Status::kOk, 0.5, {"degenerate"}),
           unavailable_entry("the baseline task failed: graph break")),
      line(2, 1, rejected, untimed_entry("rejected", "not timed")),
      missing_line(task(2, 2), "no solution",
                   {{"eager", untimed_entry("missing", "none")},
                    {"compile", untimed_entry("missing", "none")}}),
  };
  SummaryContext context;
  context.suite = "/suite";
  context.solutions = "/solutions.jsonl";
  context.torch = "2.5.1";
  context.baselines = {"eager", "compile", "cuda-graph"};
  context.unavailable = {{"cuda-graph", "CUDA graphs need a CUDA device"}};
  context.created_at = "2026-11-22T10:00:00Z";
  context.tolerance = Tolerance::parse("kernelbench").to_json();
  const json summary = make_summary(lines, context);

  EXPECT_EQ(summary["suite"], "/suite");
  EXPECT_EQ(summary["solutions"], "/solutions.jsonl");
  EXPECT_EQ(summary["device"]["name"], "NVIDIA H200");
  EXPECT_FALSE(summary.contains("devices"));
  EXPECT_EQ(summary["created_at"], "2026-11-22T10:00:00Z");
  EXPECT_EQ(summary["torch"], "2.5.1");
  EXPECT_EQ(summary["tolerance"]["mode"], "kernelbench");
  EXPECT_DOUBLE_EQ(summary["tolerance"]["atol"].get<double>(), 1e-2);
  EXPECT_EQ(summary["tasks"], 4);
  EXPECT_EQ(summary["overall"]["tasks"], 4);
  EXPECT_EQ(summary["overall"]["correct"], 2);
  EXPECT_DOUBLE_EQ(summary["overall"]["fast_1"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(summary["overall"]["geomean"].get<double>(), 1.0);
  EXPECT_EQ(summary["levels"]["1"]["tasks"], 2);
  EXPECT_DOUBLE_EQ(summary["levels"]["1"]["success_rate"].get<double>(), 1.0);
  EXPECT_EQ(summary["levels"]["2"]["correct"], 0);
  EXPECT_TRUE(summary["levels"]["2"]["median"].is_null());
  EXPECT_EQ(summary["rejected"], json({{"count", 1}, {"tasks", {"level2/1_T"}}}));
  EXPECT_EQ(summary["degenerate"], json({{"count", 1}, {"tasks", {"level1/2_T"}}}));
  EXPECT_EQ(summary["missing"]["tasks"], json({"level2/2_T"}));
  EXPECT_EQ(summary["statuses"]["ok"], 2);

  // The eager baseline is the plain evaluation.
  EXPECT_EQ(summary["baselines"]["eager"]["overall"], summary["overall"]);
  // A task the baseline could not run on is left out of its statistics, and listed.
  const json& compile = summary["baselines"]["compile"];
  EXPECT_EQ(compile["overall"]["tasks"], 3);
  EXPECT_EQ(compile["overall"]["correct"], 1);
  EXPECT_DOUBLE_EQ(compile["overall"]["max"].get<double>(), 1.5);
  EXPECT_EQ(compile["unavailable_tasks"]["tasks"], json({"level1/2_T"}));
  EXPECT_EQ(summary["baselines"]["cuda-graph"],
            json({{"unavailable", "CUDA graphs need a CUDA device"}}));

  const std::string table = format_summary(summary);
  EXPECT_CONTAINS(table, "overall");
  EXPECT_CONTAINS(table, "level 2");
  EXPECT_CONTAINS(table, "vs cuda-graph");
  EXPECT_CONTAINS(table, "rejected: 1 (level2/1_T)");
  EXPECT_CONTAINS(table, "tolerance kernelbench");
}

TEST(SummaryTest, ResultLineCarriesTheVerdict) {
  Verdict v = verdict(Status::kOk, 1.84);
  v.speedup_ci = Interval{1.8, 1.88};
  v.flags = {"noisy"};
  v.finalize();
  const json l = line(1, 3, v, unavailable_entry("torch.compile needs PyTorch >= 2.0"));
  EXPECT_EQ(l["level"], 1);
  EXPECT_EQ(l["task_id"], 3);
  EXPECT_EQ(l["task_name"], "3_T");
  EXPECT_EQ(l["task_file"], "/suite/level1/3_T.py");
  EXPECT_EQ(l["solution_file"], "/out/solutions/x.py");
  EXPECT_EQ(l["status"], "ok");
  EXPECT_EQ(l["correct"], true);
  EXPECT_DOUBLE_EQ(l["speedup"].get<double>(), 1.84);
  EXPECT_EQ(l["speedup_ci"].size(), 2u);
  EXPECT_DOUBLE_EQ(l["reward"].get<double>(), v.reward);
  EXPECT_GT(v.reward, 1.0);
  EXPECT_DOUBLE_EQ(l["reference_ms"].get<double>(), 1.0);
  EXPECT_EQ(l["flags"], json({"noisy"}));
  EXPECT_TRUE(l["task_flags"].is_array());
  EXPECT_EQ(l["error"], "");
  EXPECT_EQ(l["baselines"]["eager"]["status"], "ok");
  EXPECT_DOUBLE_EQ(l["baselines"]["eager"]["baseline_ms"].get<double>(), 1.0);
  EXPECT_EQ(l["baselines"]["compile"]["status"], "unavailable");
  EXPECT_EQ(l["verdict"]["device"]["name"], "NVIDIA H200");

  const json m = missing_line(task(1, 4), "no solution in s.jsonl", json::object());
  EXPECT_EQ(m["status"], "missing");
  EXPECT_TRUE(m["solution_file"].is_null());
  EXPECT_TRUE(m["speedup"].is_null());
  EXPECT_TRUE(m["verdict"].is_null());
  EXPECT_EQ(m["reward"], 0.0);
}

TEST(SummaryTest, SeveralGpusAreAllListed) {
  Verdict a = verdict(Status::kOk, 2.0);
  Verdict b = verdict(Status::kOk, 2.0);
  b.device["uuid"] = "GPU-2";
  b.device["index"] = "cuda:1";
  SummaryContext context;
  context.baselines = {"eager"};
  const json summary = make_summary({line(1, 1, a, json()), line(1, 2, b, json())}, context);
  EXPECT_EQ(summary["device"]["index"], "cuda:0");
  ASSERT_TRUE(summary.contains("devices"));
  EXPECT_EQ(summary["devices"].size(), 2u);
}

TEST(SummaryTest, TimestampIsUtcIso8601) {
  const std::string now = utc_timestamp();
  ASSERT_EQ(now.size(), 20u);
  EXPECT_EQ(now[10], 'T');
  EXPECT_EQ(now.back(), 'Z');
}

}  // namespace
}  // namespace cudal1::bench
