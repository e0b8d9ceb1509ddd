// How each record maps to a row: the column lists the queries select and the readers that turn a
// selected row back into a record. Kept together so a column cannot be added to one and not the
// other. Every query names its table with the alias used here (tasks t, runs r, prompts p,
// responses s, candidates c, verdicts v, rewards w, reward_answers a).
#pragma once

#include <string>
#include <vector>

#include "cudal1/store/store.hpp"
#include "statement.hpp"

namespace cudal1::store {

inline constexpr const char* kTaskColumns = "t.id, t.path, t.name, t.source, t.source_sha256";
inline constexpr const char* kRunColumns =
    "r.id, r.task_id, r.model, r.llm, r.options, r.state, r.created_at";
inline constexpr const char* kPromptColumns =
    "p.id, p.run_id, p.round, p.sample, p.custom_id, p.request, p.exemplars, p.state, p.error";
inline constexpr const char* kResponseColumns =
    "s.prompt_id, s.raw, s.content, s.finish_reason, s.prompt_tokens, s.completion_tokens, "
    "s.received_at";
inline constexpr const char* kCandidateColumns =
    "c.id, c.run_id, c.prompt_id, c.kind, c.source, c.source_sha256, c.analysis, c.parents";
inline constexpr int kCandidateColumnCount = 8;
inline constexpr const char* kRewardColumns =
    "w.id, w.task_key, w.candidate_id, w.request_id, w.step, w.group_id, w.status, w.raw_reward, "
    "w.reward, w.advantage, w.created_at, w.answer_id";
inline constexpr const char* kAnswerColumns =
    "a.id, a.request_key, a.request_id, a.endpoint, a.body, a.answered_at";
inline constexpr const char* kVerdictColumns =
    "v.candidate_id, v.status, v.speedup, v.reward, v.verdict, v.duplicate_of, v.evaluated_at";

// JSON as stored: compact, and never throwing on text that is not UTF-8 (a raw response is kept
// with the bad bytes replaced rather than lost).
std::string json_text(const nlohmann::json& value);
std::string id_list_text(const std::vector<std::int64_t>& ids);

// Readers of the columns above, starting at column `first` of the row.
TaskRecord read_task(const Statement& row, int first = 0);
RunRecord read_run(const Statement& row, int first = 0);
PromptRecord read_prompt(const Statement& row, int first = 0);
ResponseRecord read_response(const Statement& row, int first = 0);
CandidateRecord read_candidate(const Statement& row, int first = 0);
VerdictRecord read_verdict(const Statement& row, int first = 0);
RewardRecord read_reward(const Statement& row, int first = 0);
AnswerRecord read_answer(const Statement& row, int first = 0);

}  // namespace cudal1::store
