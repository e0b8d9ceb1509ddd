#include "cudal1/data/stored_review.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "cudal1/search/optimize_settings.hpp"

namespace cudal1::data {
namespace {

using nlohmann::json;

bool stage_wanted(const std::string& wanted, const store::RunRecord& run) {
  return wanted == "all" || search::stage_of_run(run.options, run.llm) == wanted;
}

bool flagged_unreviewed(const store::VerdictRecord& v) {
  const auto flags = v.verdict.value("flags", std::vector<std::string>{});
  return std::find(flags.begin(), flags.end(), flag::kUnreviewed) != flags.end();
}

// The outcome a verdict is counted under.
std::string outcome_of(const review::ReviewResult& r) {
  if (r.state != "reviewed") return "failed";
  return r.verdict;
}

void count(StoredReviewCounts& counts, const std::string& outcome) {
  if (outcome == "legitimate")
    ++counts.legitimate;
  else if (outcome == "hack")
    ++counts.hack;
  else if (outcome == "uncertain")
    ++counts.uncertain;
  else
    ++counts.failed;
}

struct Reviewed {
  json verdict;  // the verdict JSON after the review
  std::string outcome;
};

}  // namespace

StoredReviewCounts review_stored(store::Store& store, const review::RewardChecker& checker,
                                 const StoredReviewFilter& filter,
                                 const std::function<void(const std::string&)>& progress) {
  static const char* const kStages[] = {search::kStageGenerate, search::kStageOptimize,
                                        search::kStageRl, "all"};
  if (std::find(std::begin(kStages), std::end(kStages), filter.stage) == std::end(kStages)) {
    throw std::invalid_argument(
        fmt::format("--stage '{}' is not one of generate, optimize, rl, all", filter.stage));
  }
  std::vector<store::RunRecord> runs;
  if (filter.run) {
    auto run = store.run(*filter.run);
    if (!run) {
      throw std::invalid_argument(fmt::format("--run {}: the store {} has no such run", *filter.run,
                                              store.path().string()));
    }
    runs.push_back(std::move(*run));
  } else {
    runs = store.runs();
  }
  StoredReviewCounts counts;
  // One review per code of a task, whichever run and candidate it came from.
  std::map<std::pair<std::int64_t, std::string>, Reviewed> done;
  for (const auto& run : runs) {
    if (!stage_wanted(filter.stage, run)) continue;
    const auto task = store.task(run.task_id);
    if (!task) continue;
    for (const auto& [candidate, record] : store.pool(run.id)) {
      if (!candidate.prompt_id && candidate.kind == "reference") continue;
      if (!flagged_unreviewed(record)) continue;
      ++counts.unreviewed;
      const auto key = std::make_pair(task->id, candidate.source_sha256);
      auto it = done.find(key);
      if (it == done.end()) {
        Verdict verdict = Verdict::from_json(record.verdict);
        const json earlier = verdict.details.value("review", json(nullptr));
        const auto result =
            checker.review_again(verdict, {task->name, task->source, candidate.source});
        if (!result) continue;  // the flag is there: cannot happen
        ++counts.asked;
        verdict.details["review"]["earlier"] = earlier;
        verdict.details["review"]["reviewed_at"] = store::now_iso8601();
        const std::string outcome = outcome_of(*result);
        if (progress) {
          progress(fmt::format("{} candidate {}: {}", task->name, candidate.id,
                               review::review_line(*result)));
        }
        it = done.emplace(key, Reviewed{verdict.to_json(), outcome}).first;
      }
      count(counts, it->second.outcome);
      store::VerdictRecord updated = record;
      const Verdict after = Verdict::from_json(it->second.verdict);
      updated.status = std::string(to_string(after.status));
      updated.speedup = after.speedup;
      updated.reward = after.reward;
      updated.verdict = it->second.verdict;
      store.update_verdict(updated);
      ++counts.updated;
    }
  }
  return counts;
}

}  // namespace cudal1::data
