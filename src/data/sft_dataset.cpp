#include "cudal1/data/sft_dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <stdexcept>

#include "cudal1/eval/verdict.hpp"
#include "cudal1/search/optimize_settings.hpp"

namespace cudal1::data {
namespace {

using nlohmann::json;

// The verdict fields a record carries: enough to tell how the reply was measured and to replay
// the evaluation (seeds), without the logs.
constexpr const char* kVerdictFields[] = {
    "speedup_ci",    "correct", "reference_ms", "candidate_ms", "samples", "max_abs_error",
    "max_rel_error", "flags",   "task_flags",   "device",       "seeds"};

bool stage_selected(const std::string& wanted, const std::string& stage) {
  if (wanted == "all") return stage == search::kStageGenerate || stage == search::kStageOptimize;
  return stage == wanted;
}

constexpr LeftOutReason kReasons[] = {
    {"unreviewed", "ok but suspiciously fast, and never reviewed",
     "review them with `cudal1 review --db DB --review-llm URL|cmd:COMMAND`, or keep them "
     "marked with --include-unreviewed"},
    {"rejected", "caught as reward hacks (a hack check or the reviewer)", ""},
    {"incorrect", "wrong outputs", ""},
    {"failed", "did not build, crashed or timed out", ""},
    {"unparseable", "no usable ModelNew code in the reply", ""},
    {"no_reply", "the stored prompt or reply is missing", ""},
    {"below_min_speedup", "slower than --min-speedup", "lower --min-speedup to keep them"},
    {"duplicate", "the same code as a kept, faster (or earlier) reply of the task", ""},
};

bool has_flag(const store::VerdictRecord& v, std::string_view wanted) {
  const auto flags = v.verdict.value("flags", std::vector<std::string>{});
  return std::any_of(flags.begin(), flags.end(),
                     [&](const std::string& name) { return name == wanted; });
}

// Why a reply cannot be a record whatever the filter: its verdict. nullopt for a verified
// speedup a model should learn from (correct, timed, nothing suspicious left) and for one that
// is only unreviewed.
std::optional<std::string> unusable(const store::VerdictRecord& v) {
  if (v.outline().trusted()) return std::nullopt;
  // An ok verdict with a reject flag is one an older cudal1 stored: rejected all the same.
  if (v.status == "ok" && v.speedup) return "rejected";
  if (v.status == "rejected" || v.status == "incorrect" || v.status == "unparseable")
    return v.status;
  return "failed";  // compile_error, runtime_error, timeout, or ok without a speedup
}

json verdict_summary(const store::VerdictRecord& v) {
  json out = {{"status", v.status},
              {"speedup", v.speedup ? json(*v.speedup) : json(nullptr)},
              {"reward", v.reward},
              {"evaluated_at", v.evaluated_at},
              {"duplicate_of", v.duplicate_of ? json(*v.duplicate_of) : json(nullptr)}};
  if (!v.verdict.is_object()) return out;
  for (const char* key : kVerdictFields) {
    if (const auto it = v.verdict.find(key); it != v.verdict.end()) out[key] = *it;
  }
  return out;
}

// The conversation as the model had it: the request's messages, then its reply.
json messages_of(const store::PromptRecord& prompt, const store::ResponseRecord& response) {
  json messages = json::array();
  for (const auto& m : prompt.request.value("messages", json::array())) {
    messages.push_back({{"role", m.value("role", "")}, {"content", m.value("content", "")}});
  }
  messages.push_back({{"role", "assistant"}, {"content", response.content}});
  return messages;
}

struct Kept {
  double speedup = 0;
  std::int64_t candidate_id = 0;
  json record;
};

}  // namespace

std::span<const LeftOutReason> left_out_reasons() {
  return kReasons;
}

std::size_t SftCounts::count(std::string_view reason) const {
  const auto it = left_out.find(std::string(reason));
  return it == left_out.end() ? 0 : it->second;
}

std::string task_key_of(const store::RunRecord& run, const store::TaskRecord& task) {
  const std::string key = run.options.value("suite_key", "");
  return key.empty() ? task.path : key;
}

std::optional<int> level_of_key(const std::string& key) {
  static const std::regex kLevel(R"(^level([0-9]{1,4})/)");
  std::smatch match;
  if (!std::regex_search(key, match, kLevel)) return std::nullopt;
  return std::stoi(match[1].str());
}

SftDataset sft_dataset(store::Store& store, const SftFilter& filter) {
  if (filter.stage != "all" && filter.stage != search::kStageGenerate &&
      filter.stage != search::kStageOptimize) {
    throw std::invalid_argument(
        fmt::format("--stage '{}' is not one of generate, optimize, all", filter.stage));
  }
  SftDataset dataset;
  SftCounts& counts = dataset.counts;
  std::map<std::pair<std::string, std::string>, Kept> kept;  // by (task, code SHA-256)
  for (const auto& run : store.runs()) {
    const std::string stage = search::stage_of_run(run.options, run.llm);
    if (!stage_selected(filter.stage, stage)) continue;
    // A generate run's round tag; null for runs without one.
    const json round = run.options.value("round", json());
    if (filter.round && (!round.is_number_integer() || round.get<int>() != *filter.round)) continue;
    const auto task = store.task(run.task_id);
    if (!task) continue;
    const std::string key = task_key_of(run, *task);
    if (!filter.levels.empty()) {
      const auto level = level_of_key(key);
      if (!level ||
          std::find(filter.levels.begin(), filter.levels.end(), *level) == filter.levels.end())
        continue;
    }
    std::map<std::int64_t, store::PromptRecord> prompts;
    for (auto& p : store.prompts(run.id)) prompts.emplace(p.id, std::move(p));
    for (const auto& [candidate, verdict] : store.pool(run.id)) {
      if (!candidate.prompt_id) continue;  // the reference the run's pool starts from
      ++counts.replies;
      if (const auto why = unusable(verdict)) {
        ++counts.left_out[*why];
        continue;
      }
      const bool unreviewed = has_flag(verdict, flag::kUnreviewed);
      if (unreviewed && !filter.include_unreviewed) {
        ++counts.left_out["unreviewed"];
        continue;
      }
      if (filter.min_speedup && *verdict.speedup < *filter.min_speedup) {
        ++counts.left_out["below_min_speedup"];
        continue;
      }
      const auto prompt = prompts.find(*candidate.prompt_id);
      const auto response = store.response(*candidate.prompt_id);
      if (prompt == prompts.end() || !response) {
        ++counts.left_out["no_reply"];
        continue;
      }
      Kept entry{*verdict.speedup,
                 candidate.id,
                 {{"messages", messages_of(prompt->second, *response)},
                  {"task", key},
                  {"candidate_id", candidate.id},
                  {"run_id", run.id},
                  {"prompt_id", prompt->second.id},
                  {"stage", stage},
                  {"round", round.is_number_integer() ? round : json(nullptr)},
                  {"model", run.model},
                  {"code_sha256", candidate.source_sha256},
                  {"speedup", *verdict.speedup},
                  {"unreviewed", unreviewed},
                  {"verdict", verdict_summary(verdict)}}};
      auto [it, inserted] = kept.try_emplace(std::make_pair(key, candidate.source_sha256), entry);
      if (inserted) continue;
      ++counts.left_out["duplicate"];
      // The fastest measurement of the code wins; on a tie, the earliest reply.
      if (entry.speedup > it->second.speedup ||
          (entry.speedup == it->second.speedup && entry.candidate_id < it->second.candidate_id)) {
        it->second = std::move(entry);
      }
    }
  }
  std::vector<Kept> ordered;
  for (auto& [key, entry] : kept) ordered.push_back(std::move(entry));
  std::sort(ordered.begin(), ordered.end(), [](const Kept& a, const Kept& b) {
    const auto& ta = a.record["task"].get_ref<const std::string&>();
    const auto& tb = b.record["task"].get_ref<const std::string&>();
    return ta != tb ? ta < tb : a.candidate_id < b.candidate_id;
  });
  for (auto& entry : ordered) {
    if (entry.record["unreviewed"].get<bool>()) ++counts.included_unreviewed;
    dataset.records.push_back(std::move(entry.record));
  }
  counts.records = dataset.records.size();
  return dataset;
}

}  // namespace cudal1::data
