#include "cudal1/report/optimize_run.hpp"

#include <fmt/format.h>

#include "cudal1/common/error.hpp"
#include "cudal1/eval/profile.hpp"
#include "json_fields.hpp"

namespace cudal1::report {

const OptimizeCandidate* OptimizeRun::best_candidate() const {
  const auto it = summary.find("best_candidate_id");
  if (it == summary.end() || !it->is_number_integer()) return nullptr;
  for (const auto& candidate : candidates) {
    if (candidate.id == it->get<std::int64_t>()) return &candidate;
  }
  return nullptr;
}

namespace {

void check_optimize_summary(const nlohmann::json& summary, const std::filesystem::path& path) {
  FieldReader top(summary, path.string());
  top.integer("run_id");
  top.number("best_speedup");
  top.optional_integer("best_candidate_id");
  const auto it = summary.find("per_round");
  if (it == summary.end() || !it->is_array()) {
    throw InputError(fmt::format("{}: field 'per_round' must be a list", path.string()));
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    FieldReader round((*it)[i], fmt::format("{} per_round[{}]", path.string(), i));
    round.integer("round");
    round.number("best_speedup");
    round.number("best_speedup_so_far");
  }
}

OptimizeCandidate read_candidate(const nlohmann::json& line, const std::string& where) {
  FieldReader r(line, where);
  OptimizeCandidate c;
  c.id = r.integer("id");
  c.round = static_cast<int>(r.integer("round"));
  c.prompt_id = r.optional_integer("prompt_id");
  c.kind = r.text_or("kind", "generated");
  c.status = r.text("status");
  c.speedup = r.number("speedup");
  c.speedup_ci = r.interval("speedup_ci");
  c.flags = r.strings("flags");
  c.error = r.text_or("error", "");
  c.analysis = r.text_or("analysis", "");
  c.code = r.text_or("code", "");
  c.duplicate_of = r.optional_integer("duplicate_of");
  if (c.status == "ok" && line.contains("profile")) {
    if (const auto profile = Profile::from_json(line["profile"])) {
      c.roof = profile->of_roof();
      c.profile_summary = profile->summary;
    }
  }
  return c;
}

}  // namespace

OptimizeRun load_optimize_run(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  OptimizeRun run;
  run.dir = dir;
  const auto summary_path = dir / "summary.json";
  run.summary = read_json_file(summary_path);
  check_optimize_summary(run.summary, summary_path);

  // task.py is the copy every candidate was evaluated against; the recorded path may have
  // changed since.
  const fs::path task = FieldReader(run.summary, summary_path.string()).text_or("task", "");
  run.reference = read_source_if_present(task, {dir / "task.py", task});
  run.best = read_source_if_present(dir / "best.py", {dir / "best.py"});
  if (!run.best.text) run.best.note = "no candidate of this run has been verified (no best.py)";

  const auto lines_path = dir / "candidates.jsonl";
  std::error_code ec;
  run.has_candidates_file = fs::is_regular_file(lines_path, ec);
  if (run.has_candidates_file) {
    for (const auto& [line_number, line] : read_json_lines(lines_path)) {
      run.candidates.push_back(
          read_candidate(line, fmt::format("{} line {}", lines_path.string(), line_number)));
    }
  }
  return run;
}

}  // namespace cudal1::report
