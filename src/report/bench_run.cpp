#include "cudal1/report/bench_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "cudal1/common/error.hpp"
#include "cudal1/eval/profile.hpp"
#include "json_fields.hpp"

namespace cudal1::report {

bool TaskResult::degenerate() const {
  return std::find(task_flags.begin(), task_flags.end(), "degenerate") != task_flags.end();
}

std::vector<int> BenchRun::levels() const {
  std::set<int> levels;
  for (const auto& task : tasks) levels.insert(task.level);
  return {levels.begin(), levels.end()};
}

namespace {

// summary.json must carry the statistics the report's summary table shows.
void check_bench_summary(const nlohmann::json& summary, const std::filesystem::path& path) {
  const std::string where = path.string();
  FieldReader top(summary, where);
  const nlohmann::json overall = top.object_or_empty("overall");
  if (overall.empty()) {
    throw InputError(
        fmt::format("{}: field 'overall' (the statistics of every task) is missing", where));
  }
  auto check_stats = [&](const nlohmann::json& stats, const std::string& name) {
    FieldReader reader(stats, fmt::format("{} {}", where, name));
    for (const char* key : {"tasks", "correct", "success_rate", "fast_0", "fast_1", "fast_1.5",
                            "fast_2", "mean", "median", "geomean", "p25", "p75", "max"})
      reader.number(key);
  };
  check_stats(overall, "overall");
  const nlohmann::json levels = top.object_or_empty("levels");
  for (const auto& [level, stats] : levels.items()) check_stats(stats, "levels." + level);
}

TaskResult read_task(const nlohmann::json& line, const std::string& where,
                     const std::filesystem::path& dir, const std::filesystem::path& suite) {
  namespace fs = std::filesystem;
  FieldReader r(line, where);
  TaskResult t;
  t.level = static_cast<int>(r.integer("level"));
  const auto task_id = r.optional_integer("task_id");
  if (task_id) t.task_id = static_cast<int>(*task_id);
  t.name = r.text("task_name");
  t.status = r.text("status");
  t.correct = r.boolean_or("correct", false);
  t.speedup = r.number("speedup");
  t.speedup_ci = r.interval("speedup_ci");
  t.reward = r.number("reward");
  t.reference_ms = r.number("reference_ms");
  t.candidate_ms = r.number("candidate_ms");
  t.flags = r.strings("flags");
  t.task_flags = r.strings("task_flags");
  t.error = r.text_or("error", "");
  t.baselines = r.object_or_empty("baselines");
  if (t.status == "ok" && line.contains("verdict") && line["verdict"].is_object()) {
    if (const auto profile = stored_profile(line["verdict"], "candidate")) {
      t.roof = profile->of_roof();
      t.profile_summary = profile->summary;
    }
  }

  const fs::path task_file = r.text_or("task_file", "");
  const fs::path level_dir = fmt::format("level{}", t.level);
  t.task = read_source_if_present(
      task_file,
      {task_file,
       suite.empty() || task_file.empty() ? fs::path() : suite / level_dir / task_file.filename()});
  const fs::path solution_file = r.text_or("solution_file", "");
  if (solution_file.empty()) {
    t.solution.note = t.status == "missing" ? "no solution was submitted for this task"
                                            : "not available: results.jsonl names no solution";
  } else {
    // The directory may have moved since the bench ran: look for the solution inside it too.
    const fs::path moved = dir / "solutions" / level_dir / solution_file.filename();
    t.solution = read_source_if_present(solution_file, {solution_file, moved});
  }
  return t;
}

}  // namespace

BenchRun load_bench_run(const std::filesystem::path& dir,
                        const std::optional<std::filesystem::path>& suite) {
  BenchRun run;
  run.dir = dir;
  const auto summary_path = dir / "summary.json";
  run.summary = read_json_file(summary_path);
  check_bench_summary(run.summary, summary_path);
  if (suite) {
    std::error_code ec;
    if (!std::filesystem::is_directory(*suite, ec))
      throw InputError(fmt::format("--suite {}: not a directory", suite->string()));
  }
  const std::filesystem::path suite_dir =
      suite ? *suite
            : std::filesystem::path(
                  FieldReader(run.summary, summary_path.string()).text_or("suite", ""));
  const auto results_path = dir / "results.jsonl";
  // A bench killed after evaluating a task again and before compacting the file leaves both of
  // its lines: the later one stands, as cudal1 bench reads it.
  std::map<std::pair<int, std::string>, std::size_t> position;
  for (const auto& [line_number, line] : read_json_lines(results_path)) {
    TaskResult task = read_task(line, fmt::format("{} line {}", results_path.string(), line_number),
                                dir, suite_dir);
    const auto key =
        std::make_pair(task.level, task.task_id ? std::to_string(*task.task_id) : task.name);
    if (const auto [at, added] = position.emplace(key, run.tasks.size()); !added) {
      run.tasks[at->second] = std::move(task);
    } else {
      run.tasks.push_back(std::move(task));
    }
  }
  if (run.tasks.empty()) {
    throw InputError(fmt::format("'{}' holds no results (no task lines)", results_path.string()));
  }
  return run;
}

}  // namespace cudal1::report
