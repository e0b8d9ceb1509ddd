#include "records.hpp"

#include <fmt/format.h>

namespace cudal1::store {
namespace {

nlohmann::json parse_json(const Statement& row, int column, const char* field) {
  try {
    return nlohmann::json::parse(row.text(column));
  } catch (const nlohmann::json::exception& e) {
    throw StoreError(fmt::format("store {}: field {} does not hold JSON: {}", row.path().string(),
                                 field, e.what()));
  }
}

std::vector<std::int64_t> parse_id_list(const Statement& row, int column, const char* field) {
  const auto value = parse_json(row, column, field);
  try {
    return value.get<std::vector<std::int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    throw StoreError(fmt::format("store {}: field {} is not a list of ids: {}", row.path().string(),
                                 field, e.what()));
  }
}

}  // namespace

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string id_list_text(const std::vector<std::int64_t>& ids) {
  return json_text(nlohmann::json(ids));
}

VerdictRecord verdict_record_of(std::int64_t candidate_id, const Verdict& verdict) {
  VerdictRecord record;
  record.candidate_id = candidate_id;
  record.status = std::string(to_string(verdict.status));
  record.speedup = verdict.speedup;
  record.reward = verdict.reward;
  record.verdict = verdict.to_json();
  record.evaluated_at = now_iso8601();
  return record;
}

Verdict VerdictRecord::outline() const {
  Verdict outline;
  outline.status = parse_status(status).value_or(Status::kRuntimeError);
  outline.speedup = speedup;
  outline.reward = reward;
  if (verdict.is_object()) outline.flags = verdict.value("flags", std::vector<std::string>{});
  return outline;
}

TaskRecord read_task(const Statement& row, int first) {
  TaskRecord task;
  task.id = row.int64(first);
  task.path = row.text(first + 1);
  task.name = row.text(first + 2);
  task.source = row.text(first + 3);
  task.source_sha256 = row.text(first + 4);
  return task;
}

RunRecord read_run(const Statement& row, int first) {
  RunRecord run;
  run.id = row.int64(first);
  run.task_id = row.int64(first + 1);
  run.model = row.text(first + 2);
  run.llm = row.text(first + 3);
  run.options = parse_json(row, first + 4, "runs.options");
  run.state = row.text(first + 5);
  run.created_at = row.text(first + 6);
  return run;
}

PromptRecord read_prompt(const Statement& row, int first) {
  PromptRecord prompt;
  prompt.id = row.int64(first);
  prompt.run_id = row.int64(first + 1);
  prompt.round = static_cast<int>(row.int64(first + 2));
  prompt.sample = static_cast<int>(row.int64(first + 3));
  prompt.custom_id = row.text(first + 4);
  prompt.request = parse_json(row, first + 5, "prompts.request");
  prompt.exemplars = parse_id_list(row, first + 6, "prompts.exemplars");
  prompt.state = row.text(first + 7);
  prompt.error = row.text(first + 8);
  return prompt;
}

ResponseRecord read_response(const Statement& row, int first) {
  ResponseRecord response;
  response.prompt_id = row.int64(first);
  response.raw = parse_json(row, first + 1, "responses.raw");
  response.content = row.text(first + 2);
  response.finish_reason = row.text(first + 3);
  response.prompt_tokens = row.int64(first + 4);
  response.completion_tokens = row.int64(first + 5);
  response.received_at = row.text(first + 6);
  return response;
}

CandidateRecord read_candidate(const Statement& row, int first) {
  CandidateRecord candidate;
  candidate.id = row.int64(first);
  candidate.run_id = row.int64(first + 1);
  candidate.prompt_id = row.optional_int64(first + 2);
  candidate.kind = row.text(first + 3);
  candidate.source = row.text(first + 4);
  candidate.source_sha256 = row.text(first + 5);
  candidate.analysis = row.text(first + 6);
  candidate.parents = parse_id_list(row, first + 7, "candidates.parents");
  return candidate;
}

VerdictRecord read_verdict(const Statement& row, int first) {
  VerdictRecord verdict;
  verdict.candidate_id = row.int64(first);
  verdict.status = row.text(first + 1);
  verdict.speedup = row.optional_real(first + 2);
  verdict.reward = row.real(first + 3);
  verdict.verdict = parse_json(row, first + 4, "verdicts.verdict");
  verdict.duplicate_of = row.optional_int64(first + 5);
  verdict.evaluated_at = row.text(first + 6);
  return verdict;
}

RewardRecord read_reward(const Statement& row, int first) {
  RewardRecord reward;
  reward.id = row.int64(first);
  reward.task_key = row.text(first + 1);
  reward.candidate_id = row.optional_int64(first + 2);
  reward.request_id = row.text(first + 3);
  reward.step = row.optional_int64(first + 4);
  reward.group = row.optional_text(first + 5);
  reward.status = row.text(first + 6);
  reward.raw_reward = row.real(first + 7);
  reward.reward = row.real(first + 8);
  reward.advantage = row.optional_real(first + 9);
  reward.created_at = row.text(first + 10);
  reward.answer_id = row.optional_int64(first + 11);
  return reward;
}

AnswerRecord read_answer(const Statement& row, int first) {
  AnswerRecord answer;
  answer.id = row.int64(first);
  answer.request_key = row.text(first + 1);
  answer.request_id = row.text(first + 2);
  answer.endpoint = row.text(first + 3);
  answer.body = row.text(first + 4);
  answer.answered_at = row.text(first + 5);
  return answer;
}

}  // namespace cudal1::store
