#include "cudal1/search/run_summary.hpp"

#include <map>

#include "cudal1/eval/profile.hpp"

namespace cudal1::search {

BestCandidate best_generated(store::Store& store, std::int64_t run_id) {
  BestCandidate best;
  for (const auto& entry : store.pool(run_id)) {
    if (entry.candidate.kind != "generated" || entry.verdict.status != "ok" ||
        !entry.verdict.speedup)
      continue;
    if (!best.speedup || *entry.verdict.speedup > *best.speedup) {
      best.candidate = entry.candidate;
      best.speedup = entry.verdict.speedup;
      best.status = entry.verdict.status;
    }
  }
  return best;
}

nlohmann::json summarize_run(store::Store& store, std::int64_t run_id) {
  const auto run = store.run(run_id);
  if (!run) return nlohmann::json::object();
  const auto task = store.task(run->task_id);
  const auto counts = store.counts(run_id);
  const auto best = best_generated(store, run_id);

  std::map<std::int64_t, int> round_of_prompt;
  std::map<int, nlohmann::json> rounds;
  for (const auto& p : store.prompts(run_id)) {
    round_of_prompt[p.id] = p.round;
    auto& r = rounds[p.round];
    if (r.is_null())
      r = {{"round", p.round}, {"prompts", 0}, {"answered", 0}, {"failed", 0}, {"ok", 0}};
    r["prompts"] = r["prompts"].get<int>() + 1;
    if (p.state == "answered") r["answered"] = r["answered"].get<int>() + 1;
    if (p.state == "failed") r["failed"] = r["failed"].get<int>() + 1;
  }
  std::map<std::string, int> statuses;
  std::map<int, double> round_best;
  for (const auto& entry : store.pool(run_id)) {
    if (entry.candidate.kind == "reference" || !entry.candidate.prompt_id) continue;
    ++statuses[entry.verdict.status];
    const int round = round_of_prompt[*entry.candidate.prompt_id];
    if (entry.verdict.status == "ok" && entry.verdict.speedup) {
      rounds[round]["ok"] = rounds[round]["ok"].get<int>() + 1;
      round_best[round] = std::max(round_best[round], *entry.verdict.speedup);
    }
  }
  nlohmann::json per_round = nlohmann::json::array();
  double so_far = 0;
  for (auto& [round, r] : rounds) {
    if (round_best.count(round)) so_far = std::max(so_far, round_best[round]);
    r["best_speedup"] =
        round_best.count(round) ? nlohmann::json(round_best[round]) : nlohmann::json(nullptr);
    r["best_speedup_so_far"] = so_far > 0 ? nlohmann::json(so_far) : nlohmann::json(nullptr);
    per_round.push_back(r);
  }
  return {{"run_id", run_id},
          {"task", task ? task->path : ""},
          {"task_name", task ? task->name : ""},
          {"model", run->model},
          {"llm", run->llm},
          {"options", run->options},
          {"created_at", run->created_at},
          {"rounds", rounds.empty() ? 0 : rounds.rbegin()->first},
          {"rounds_planned", run->options.value("rounds", 0)},
          {"candidates", counts.candidates},
          {"evaluations", counts.evaluations},
          {"prompt_tokens", counts.prompt_tokens},
          {"completion_tokens", counts.completion_tokens},
          {"pending_prompts", counts.pending},
          {"failed_prompts", counts.failed},
          {"best_speedup", best.speedup ? nlohmann::json(*best.speedup) : nlohmann::json(nullptr)},
          {"best_status", best.candidate ? nlohmann::json(best.status) : nlohmann::json(nullptr)},
          {"best_candidate_id",
           best.candidate ? nlohmann::json(best.candidate->id) : nlohmann::json(nullptr)},
          {"statuses", statuses},
          {"per_round", per_round}};
}

std::string candidate_lines(store::Store& store, std::int64_t run_id) {
  std::map<std::int64_t, int> round_of_prompt;
  for (const auto& p : store.prompts(run_id)) round_of_prompt[p.id] = p.round;
  std::string lines;
  for (const auto& entry : store.pool(run_id)) {
    const auto& c = entry.candidate;
    if (c.kind == "reference" || !c.prompt_id) continue;
    const auto& v = entry.verdict;
    const nlohmann::json& full = v.verdict.is_object() ? v.verdict : nlohmann::json::object();
    auto field = [&full](const char* key, nlohmann::json fallback) {
      const auto it = full.find(key);
      return it != full.end() && !it->is_null() ? *it : fallback;
    };
    nlohmann::json line = {
        {"id", c.id},
        {"round", round_of_prompt[*c.prompt_id]},
        {"prompt_id", *c.prompt_id},
        {"kind", c.kind},
        {"status", v.status},
        {"speedup", v.speedup ? nlohmann::json(*v.speedup) : nlohmann::json(nullptr)},
        {"speedup_ci", field("speedup_ci", nullptr)},
        {"reward", v.reward},
        {"flags", field("flags", nlohmann::json::array())},
        {"error", field("error", "")},
        {"analysis", c.analysis},
        {"code", c.source},
        {"duplicate_of",
         v.duplicate_of ? nlohmann::json(*v.duplicate_of) : nlohmann::json(nullptr)}};
    if (const auto profile = stored_profile(full, "candidate"))
      line["profile"] = profile->to_json();
    // Replies are untrusted text: invalid UTF-8 becomes U+FFFD rather than a failed run.
    lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return lines;
}

}  // namespace cudal1::search
