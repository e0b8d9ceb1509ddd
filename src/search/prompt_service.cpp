#include "cudal1/search/prompt_service.hpp"

#include <algorithm>
#include <random>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/eval/verdict.hpp"

namespace cudal1::search {
namespace {

// A verdict a prompt may show as an exemplar: correct, timed, not a hack, not waiting for a
// review, and an evaluation of its own (not a copy of another candidate's verdict).
bool shows_as_exemplar(const store::PoolEntry& entry) {
  if (entry.candidate.kind != "generated" || entry.verdict.duplicate_of) return false;
  const Verdict verdict = entry.verdict.outline();
  return verdict.trusted() && !verdict.has_flag(flag::kUnreviewed);
}

// What the store holds for a task's source on one kind of device, by candidate id.
struct TaskHistory {
  std::vector<store::PoolEntry> verified;
  std::vector<store::PoolEntry> failed;
  std::string device_text;
};

TaskHistory history_of(store::Store& store, const PromptTask& task, const std::string& kind) {
  TaskHistory history;
  history.device_text = kind == "cpu" ? "the CPU" : "a CUDA GPU";
  for (const auto& run : store.runs()) {
    const auto run_task = store.task(run.task_id);
    if (!run_task || run_task->source_sha256 != task.source_sha256) continue;
    if (device_kind(run.options.value("device", "")) != kind) continue;
    for (auto& entry : store.pool(run.id)) {
      const auto& device = entry.verdict.verdict.value("device", nlohmann::json());
      if (device.is_object() && device.contains("name") && device["name"].is_string()) {
        history.device_text = "the " + device["name"].get<std::string>();
      }
      if (shows_as_exemplar(entry)) {
        history.verified.push_back(std::move(entry));
      } else if (entry.candidate.kind == "generated" && entry.verdict.status != "ok" &&
                 !entry.verdict.duplicate_of) {
        history.failed.push_back(std::move(entry));
      }
    }
  }
  const auto by_id = [](const store::PoolEntry& a, const store::PoolEntry& b) {
    return a.candidate.id < b.candidate.id;
  };
  std::sort(history.verified.begin(), history.verified.end(), by_id);
  std::sort(history.failed.begin(), history.failed.end(), by_id);
  return history;
}

}  // namespace

PromptService::PromptService(store::Store& store, PromptLibrary library, PromptSettings settings)
    : store_(store), library_(std::move(library)), settings_(std::move(settings)) {
  make_sampler(settings_.sampler, settings_.sampler_options);
  parse_profile_detail(settings_.prompt_profile);
}

nlohmann::json PromptService::prompts(const PromptTask& task, int n, std::uint64_t seed) {
  const TaskHistory history = history_of(store_, task, settings_.device_kind);
  // The pool: the reference at 1.00 (id 0: it is the task, not a stored candidate), then every
  // verified candidate.
  std::vector<PoolMember> pool = {{0, 1.0, 0, true}};
  for (const auto& entry : history.verified) {
    pool.push_back({entry.candidate.id, *entry.verdict.speedup, 0, false});
  }
  PromptContext base;
  base.task_name = task.name;
  base.reference_code = task.source;
  base.device = history.device_text;
  base.tolerance = describe_tolerance(settings_.tolerance);
  base.profile_detail = parse_profile_detail(settings_.prompt_profile);
  // The reference's profile: its side of the latest verdict that timed it.
  std::optional<Profile> reference_profile;
  for (auto it = history.verified.rbegin(); it != history.verified.rend() && !reference_profile;
       ++it) {
    reference_profile = stored_profile(it->verdict.verdict, "reference");
  }
  // The most recent failures, newest first.
  for (auto it = history.failed.rbegin();
       it != history.failed.rend() &&
       static_cast<int>(base.failures.size()) < settings_.show_failures;
       ++it) {
    const auto& v = it->verdict.verdict;
    base.failures.push_back({it->candidate.source, it->verdict.status,
                             trim_log(v.value("error", "") + "\n" + v.value("log", ""), 600, 900)});
  }
  const auto sampler = make_sampler(settings_.sampler, settings_.sampler_options);
  nlohmann::json prompts = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    std::mt19937_64 rng(seed + static_cast<std::uint64_t>(i));
    PromptContext context = base;
    nlohmann::json exemplars = nlohmann::json::array();
    for (std::size_t index : sampler->choose(pool, settings_.exemplars, i, rng)) {
      const auto& member = pool[index];
      const std::string& code =
          member.reference ? task.source : history.verified[index - 1].candidate.source;
      context.exemplars.push_back(
          {member.candidate_id, code, member.speedup, member.reference,
           member.reference
               ? reference_profile
               : stored_profile(history.verified[index - 1].verdict.verdict, "candidate")});
      const auto& shown = context.exemplars.back().profile;
      exemplars.push_back({{"candidate_id", member.reference ? nlohmann::json(nullptr)
                                                             : nlohmann::json(member.candidate_id)},
                           {"speedup", member.speedup},
                           {"reference", member.reference},
                           {"profile", shown ? shown->to_json() : nlohmann::json(nullptr)}});
    }
    nlohmann::json messages = nlohmann::json::array();
    for (const auto& m : library_.build(context, "", 0.0, std::nullopt).messages) {
      messages.push_back({{"role", m.role}, {"content", m.content}});
    }
    prompts.push_back({{"messages", messages}, {"exemplars", exemplars}});
  }
  return {{"task", task.key}, {"pool", pool.size()}, {"prompts", prompts}};
}

}  // namespace cudal1::search
