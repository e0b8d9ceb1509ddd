// Loading result directories (errors for bad input) and rendering pages (nothing untrusted
// escapes into markup), on the fixtures under tests/fixtures/report.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "cudal1/common/error.hpp"
#include "cudal1/report/html_report.hpp"
#include "cudal1/report/run_directory.hpp"

namespace cudal1::report {
namespace {

namespace fs = std::filesystem;
const fs::path kData = CUDAL1_REPORT_DATA;

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cudal1-report-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& content) {
    fs::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << content;
  }
  // The message of the InputError `action` throws, or "" when it throws none.
  template <typename Action>
  std::string input_error(Action action) {
    try {
      action();
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

// Without libraries: what the page itself contains, independent of the machine.
ReportAssets no_assets() {
  AssetOptions options;
  options.search_dirs = {"/nonexistent-cudal1-js"};
  return load_report_assets(options);
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Every <script ...> opened in the page is one we wrote: ours, the data block, libraries.
void expect_only_our_scripts(const std::string& html, std::size_t expected_scripts) {
  EXPECT_EQ(count(html, "<script"), expected_scripts);
  EXPECT_EQ(count(html, "</script>"), expected_scripts);
  EXPECT_EQ(count(html, "<!--"), 0u);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  // No markup carries an event handler (the text may mention one, escaped).
  for (auto open = html.find('<'); open != std::string::npos; open = html.find('<', open + 1)) {
    const std::string tag = html.substr(open, html.find('>', open) - open);
    EXPECT_EQ(tag.find("onerror"), std::string::npos) << tag;
  }
}

TEST_F(ScratchDir, DetectsBothKindsAndRefusesOthers) {
  EXPECT_EQ(detect_run_kind(kData / "bench"), RunKind::kBench);
  EXPECT_EQ(detect_run_kind(kData / "optimize"), RunKind::kOptimize);
  EXPECT_NE(input_error([&] { detect_run_kind(dir_); }).find("neither"), std::string::npos);
  EXPECT_NE(input_error([&] { detect_run_kind(dir_ / "missing"); }).find("does not exist"),
            std::string::npos);
  write("file.txt", "x");
  EXPECT_NE(input_error([&] { detect_run_kind(dir_ / "file.txt"); }).find("not a directory"),
            std::string::npos);
  write("results.jsonl", "{}\n");
  EXPECT_NE(input_error([&] { detect_run_kind(dir_); }).find("no summary.json"), std::string::npos);
}

TEST_F(ScratchDir, BadResultsNameTheFileLineAndField) {
  write("summary.json", R"({"overall": {"tasks": 1}, "levels": {}})");
  write("results.jsonl", "{\"level\": 1, \"task_name\": \"a\", \"status\": \"ok\"}\n\nnot json\n");
  std::string error = input_error([&] { load_bench_run(dir_); });
  EXPECT_NE(error.find("results.jsonl' line 3 is not valid JSON"), std::string::npos) << error;

  write("results.jsonl", "{\"level\": \"one\", \"task_name\": \"a\", \"status\": \"ok\"}\n");
  error = input_error([&] { load_bench_run(dir_); });
  EXPECT_NE(error.find("results.jsonl line 1: field 'level' must be an integer"), std::string::npos)
      << error;

  write("results.jsonl",
        "{\"level\": 1, \"task_name\": \"a\", \"status\": \"ok\", \"speedup_ci\": [1]}\n");
  error = input_error([&] { load_bench_run(dir_); });
  EXPECT_NE(error.find("field 'speedup_ci' must be [low, high]"), std::string::npos) << error;

  write("summary.json", R"({"levels": {}})");
  error = input_error([&] { load_bench_run(dir_); });
  EXPECT_NE(error.find("summary.json: field 'overall'"), std::string::npos) << error;

  write("summary.json", "{\"overall\": {\"mean\": \"fast\"}}");
  error = input_error([&] { load_bench_run(dir_); });
  EXPECT_NE(error.find("field 'mean' must be a number"), std::string::npos) << error;
}

TEST_F(ScratchDir, ALaterLineOfATaskReplacesTheEarlierOne) {
  // What a bench killed between evaluating a changed solution and compacting leaves.
  write("summary.json", R"({"overall": {"tasks": 2, "correct": 1, "success_rate": 0.5,
    "fast_0": 0.5, "fast_1": 0, "fast_1.5": 0, "fast_2": 0, "mean": 1, "median": 1,
    "geomean": 1, "p25": 1, "p75": 1, "max": 1}, "levels": {}})");
  write("results.jsonl",
        "{\"level\": 1, \"task_id\": 2, \"task_name\": \"2_B\", \"status\": \"incorrect\"}\n"
        "{\"level\": 1, \"task_id\": 1, \"task_name\": \"1_A\", \"status\": \"ok\"}\n"
        "{\"level\": 1, \"task_id\": 2, \"task_name\": \"2_B\", \"status\": \"ok\"}\n");
  const BenchRun run = load_bench_run(dir_);
  ASSERT_EQ(run.tasks.size(), 2u);
  EXPECT_EQ(run.tasks[0].name, "2_B");
  EXPECT_EQ(run.tasks[0].status, "ok");
  EXPECT_EQ(run.tasks[1].name, "1_A");
}

TEST_F(ScratchDir, BadCandidateLinesNameTheLine) {
  fs::copy(kData / "optimize", dir_ / "run");
  std::ofstream(dir_ / "run" / "candidates.jsonl", std::ios::app) << "{\"id\": 9, \"round\": 1}\n";
  const std::string error = input_error([&] { load_optimize_run(dir_ / "run"); });
  EXPECT_NE(error.find("candidates.jsonl line 7: field 'status' must be a string"),
            std::string::npos)
      << error;
}

TEST(BenchReport, LoadsTheFixtureAndFindsMovedFiles) {
  const BenchRun run = load_bench_run(kData / "bench", kData / "suite");
  ASSERT_EQ(run.tasks.size(), 8u);
  EXPECT_EQ(run.levels(), (std::vector<int>{1, 2, 3}));
  const auto& first = run.tasks[0];
  EXPECT_TRUE(first.task.text.has_value());      // found with --suite
  EXPECT_TRUE(first.solution.text.has_value());  // found under bench/solutions
  const auto& missing = run.tasks[5];
  EXPECT_EQ(missing.status, "missing");
  EXPECT_NE(missing.solution.note.find("no solution"), std::string::npos);
  const auto& conv = run.tasks[6];
  EXPECT_FALSE(conv.task.text.has_value());
  EXPECT_NE(conv.task.note.find("not available"), std::string::npos);
}

TEST(BenchReport, UntrustedTextStaysText) {
  const BenchRun run = load_bench_run(kData / "bench", kData / "suite");
  const std::string html = render_bench_report(run, no_assets());
  // Error hook, data block, report.js: nothing else.
  expect_only_our_scripts(html, 3);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;document.body.setAttribute"),
            std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror="), std::string::npos);
  EXPECT_NE(html.find("&lt;!-- &lt;script&gt;"), std::string::npos);
  // The summary, the charts' data, the missing libraries said on the page.
  EXPECT_NE(html.find("All levels"), std::string::npos);
  EXPECT_NE(html.find("\"canvas\":\"chart-level-3\""), std::string::npos);
  EXPECT_NE(html.find("Charts are not drawn: Chart.js (libjs-chart.js) is missing"),
            std::string::npos);
  EXPECT_NE(html.find("not available: /data/kernelbench/level3/2_Conv3d.py is not on this machine"),
            std::string::npos);
  // The policy allows no network access.
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
}

TEST(OptimizeReport, ShowsTheBestAnalysisAndEscapesIt) {
  const OptimizeRun run = load_optimize_run(kData / "optimize");
  ASSERT_EQ(run.candidates.size(), 6u);
  ASSERT_NE(run.best_candidate(), nullptr);
  EXPECT_EQ(run.best_candidate()->id, 6);
  EXPECT_TRUE(run.reference.text.has_value());  // task.py beside summary.json
  const std::string html = render_optimize_report(run, no_assets());
  expect_only_our_scripts(html, 3);
  EXPECT_NE(html.find("one fused multiply-add (addcmul)"), std::string::npos);
  EXPECT_NE(html.find("A &lt;/script&gt;&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("\"type\":\"rounds\""), std::string::npos);
  EXPECT_NE(html.find("id=\"candidate-table\""), std::string::npos);
}

TEST_F(ScratchDir, OptimizeRunWithoutCandidatesFileSaysSo) {
  fs::copy(kData / "optimize", dir_ / "run");
  fs::remove(dir_ / "run" / "candidates.jsonl");
  const OptimizeRun run = load_optimize_run(dir_ / "run");
  EXPECT_FALSE(run.has_candidates_file);
  const std::string html = render_optimize_report(run, no_assets());
  EXPECT_NE(html.find("has no candidates.jsonl"), std::string::npos);
}

TEST(TrainingReport, ChartsTheStepsAndEscapesTaskNames) {
  const std::string hostile = "level1/</script><img src=x onerror=alert(1)>";
  const TrainingRun run = summarize_training({{hostile, 1, "req", "ok", 1.5, 0.5, 1.5},
                                              {"level1/1_A", 1, "req", "rejected", 0, -0.5, {}},
                                              {hostile, 2, "req", "ok", 2.0, 1.0, 2.0}},
                                             "serve.db");
  const std::string html = render_training_report(run, no_assets());
  expect_only_our_scripts(html, 3);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("level1/&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"),
            std::string::npos);
  for (const char* canvas :
       {"chart-reward-raw", "chart-reward-smoothed", "chart-status", "chart-best"}) {
    EXPECT_NE(html.find(std::string("\"canvas\":\"") + canvas + "\""), std::string::npos) << canvas;
    EXPECT_NE(html.find(std::string("id=\"") + canvas + "\""), std::string::npos) << canvas;
  }
  EXPECT_NE(html.find("id=\"task-table\""), std::string::npos);
  EXPECT_NE(html.find("3 rewards over 2 steps"), std::string::npos);
}

TEST(TrainingReport, AStoreWithoutRewardsSaysSo) {
  const std::string html = render_training_report(summarize_training({}, "empty.db"), no_assets());
  expect_only_our_scripts(html, 3);
  EXPECT_NE(html.find("holds no rewards yet"), std::string::npos);
  EXPECT_NE(html.find("\"charts\":[]"), std::string::npos);
}

TEST_F(ScratchDir, ExplicitLibraryFilesMustBeUsable) {
  AssetOptions options;
  options.search_dirs = {dir_};
  options.chart_js = dir_ / "chart.js";
  EXPECT_NE(input_error([&] { load_report_assets(options); }).find("--chart-js"),
            std::string::npos);
  write("chart.js", "var s = '</script>';");
  EXPECT_NE(input_error([&] { load_report_assets(options); }).find("cannot be inlined"),
            std::string::npos);
  write("chart.js", "window.Chart = function () {};");
  write("highlight.js/highlight.min.js", "window.hljs = {};");
  const ReportAssets assets = load_report_assets(options);
  EXPECT_TRUE(assets.chart_js.available());
  EXPECT_TRUE(assets.highlight_js.available());  // discovered in the search folder
  EXPECT_FALSE(assets.highlight_css.available());
  ASSERT_EQ(assets.missing().size(), 1u);
  EXPECT_NE(assets.missing()[0].find("libjs-highlight.js"), std::string::npos);
  // The libraries are inlined, each allowed by its hash.
  const std::string html = render_optimize_report(load_optimize_run(kData / "optimize"), assets);
  EXPECT_NE(html.find("<script>window.Chart = function () {};</script>"), std::string::npos);
  EXPECT_EQ(count(html, "'sha256-"), 4u);
}

}  // namespace
}  // namespace cudal1::report
