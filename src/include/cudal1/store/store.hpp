// The SQLite store of optimisation runs: every task, prompt, raw response, candidate (with the
// exemplars it was shown), verdict and token count. WAL journal, one transaction per state
// change, synchronous=FULL: a process killed at any moment loses nothing it had recorded, and a
// resumed run can tell what is left to do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cudal1/eval/verdict.hpp"

struct sqlite3;

namespace cudal1::store {

struct TaskRecord {
  std::int64_t id = 0;
  std::string path;
  std::string name;  // file stem, e.g. "task" or "19_ReLU"
  std::string source;
  std::string source_sha256;
};

struct RunRecord {
  std::int64_t id = 0;
  std::int64_t task_id = 0;
  std::string model;
  std::string llm;               // client description ("http://...", "cmd:...", "batch")
  nlohmann::json options;        // rounds, samples, exemplars, temperature, sampler, device, ...
  std::string state = "active";  // "active" | "finished"
  std::string created_at;        // ISO 8601 UTC
};

struct PromptRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  int round = 0;
  int sample = 0;
  std::string custom_id;                // "cudal1-<run>-<round>-<sample>", unique in the store
  nlohmann::json request;               // the OpenAI chat-completions body
  std::vector<std::int64_t> exemplars;  // candidate ids shown in the prompt
  std::string state = "pending";        // "pending" | "answered" | "failed"
  std::string error;                    // when failed
};

struct ResponseRecord {
  std::int64_t prompt_id = 0;
  nlohmann::json raw;  // the completion body as received
  std::string content;
  std::string finish_reason;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::string received_at;
};

struct CandidateRecord {
  std::int64_t id = 0;
  std::int64_t run_id = 0;
  std::optional<std::int64_t> prompt_id;  // none for the reference that seeds the pool
  std::string kind = "generated";         // "reference" | "generated" | "unparseable"
  std::string source;                     // complete ModelNew file ("" when unparseable)
  std::string source_sha256;
  std::string analysis;               // the model's performance analysis text
  std::vector<std::int64_t> parents;  // the exemplars it was shown
};

struct VerdictRecord {
  std::int64_t candidate_id = 0;
  std::string status;  // a Verdict status ("ok", "incorrect", ..., "unparseable")
  std::optional<double> speedup;
  double reward = 0;
  nlohmann::json verdict;                    // the full verdict JSON
  std::optional<std::int64_t> duplicate_of;  // another candidate with identical source
  std::string evaluated_at;

  // The verdict as its columns and flags give it (status, speedup, reward, flags; no details):
  // what Verdict::trusted() and has_flag() read, without parsing the rest of the JSON.
  Verdict outline() const;
};

// The record of a verdict just evaluated (stamped now).
VerdictRecord verdict_record_of(std::int64_t candidate_id, const Verdict& verdict);

// One reward handed to a trainer (cudal1 serve), in the order the rewards were given.
struct RewardRecord {
  std::int64_t id = 0;
  std::string task_key;                      // the suite key, "level1/1_DiagMatmul"
  std::optional<std::int64_t> candidate_id;  // none for a completion without code
  std::string request_id;                    // the HTTP request it answered
  std::optional<std::int64_t> step;          // the trainer's step, when the request named one
  std::optional<std::string> group;          // the GRPO group, when the item named one
  std::string status;                        // the verdict's status
  double raw_reward = 0;
  double reward = 0;  // smoothed
  std::optional<double> advantage;
  std::string created_at;
  std::optional<std::int64_t> answer_id;  // the answer it was sent in (none before version 3)
};

// The answer sent for one reward request, kept so that the same request sent again (a trainer's
// retry, also after the server restarted) gets the same bytes and adds no rewards.
struct AnswerRecord {
  std::int64_t id = 0;
  std::string request_key;  // what identifies the request (cudal1 serve: a digest of its body)
  std::string request_id;   // the id the answer carries
  std::string endpoint;     // "/v1/rewards", "/get_reward"
  std::string body;         // the answer's body, as sent
  std::string answered_at;
};

// A candidate with its verdict, as the exemplar sampler and reports see it.
struct PoolEntry {
  CandidateRecord candidate;
  VerdictRecord verdict;
};

struct RunCounts {
  std::int64_t prompts = 0, pending = 0, answered = 0, failed = 0;
  std::int64_t candidates = 0;   // generated + unparseable (not the reference)
  std::int64_t evaluations = 0;  // verdicts of generated candidates actually evaluated
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
};

class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Store {
 public:
  // Opens (creating when missing) the database; throws StoreError with the path on failure.
  // Every other method throws StoreError too (SQLite's message, the path), and each change is
  // one transaction: it is recorded whole or not at all, whenever the process dies.
  explicit Store(const std::filesystem::path& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Tasks: one row per distinct (path, source).
  TaskRecord upsert_task(const std::string& path, const std::string& source);
  std::optional<TaskRecord> task(std::int64_t id);

  // Runs.
  std::int64_t create_run(const RunRecord& run);
  std::optional<RunRecord> run(std::int64_t id);
  std::optional<RunRecord> latest_run();
  std::vector<RunRecord> runs();  // every run, oldest first
  void set_run_state(std::int64_t run_id, const std::string& state);

  // Prompts. add_prompt assigns id and custom_id, and stores the prompt as pending; a second
  // prompt for the same (run, round, sample) is refused.
  PromptRecord add_prompt(const PromptRecord& prompt);
  std::vector<PromptRecord> prompts(std::int64_t run_id);  // ordered by round, sample
  std::optional<PromptRecord> prompt_by_custom_id(const std::string& custom_id);
  // An answered prompt stays answered (its response is kept).
  void mark_prompt_failed(std::int64_t prompt_id, const std::string& error);
  // A failed prompt becomes pending again (its error is cleared), so a resumed run asks again;
  // pending and answered prompts are left as they are.
  void reset_prompt(std::int64_t prompt_id);

  // Responses: recording one marks its prompt answered in the same transaction. Returns false
  // (and changes nothing) when the prompt already has a response.
  bool record_response(const ResponseRecord& response);
  std::optional<ResponseRecord> response(std::int64_t prompt_id);

  // Candidates: one per prompt at most (adding again returns the existing id), and one
  // reference per run (likewise). An empty source_sha256 is filled with the source's SHA-256.
  std::int64_t add_candidate(const CandidateRecord& candidate);
  std::vector<CandidateRecord> candidates(std::int64_t run_id);
  std::optional<CandidateRecord> candidate_for_prompt(std::int64_t prompt_id);

  // A candidate and its verdict in one transaction (verdict.candidate_id is set to the new id),
  // for callers that keep no candidate before it is evaluated (cudal1 serve): a process killed
  // mid-evaluation leaves neither.
  std::int64_t add_evaluated_candidate(const CandidateRecord& candidate, VerdictRecord verdict);
  // Deletes the run's generated candidates that have no verdict and that nothing refers to:
  // what an older cudal1 serve left when it was killed mid-evaluation. Returns how many.
  std::size_t remove_unevaluated_candidates(std::int64_t run_id);

  // Verdicts: one per candidate (recording again is ignored).
  void record_verdict(const VerdictRecord& verdict);
  // Replaces a recorded verdict's status, speedup, reward and JSON (a later review changes them;
  // duplicate_of and evaluated_at stay). Throws StoreError when the candidate has no verdict.
  void update_verdict(const VerdictRecord& verdict);
  std::optional<VerdictRecord> verdict(std::int64_t candidate_id);
  // A verdict already recorded in this run for the same source (so it is not evaluated twice).
  std::optional<VerdictRecord> verdict_for_source(std::int64_t run_id,
                                                  const std::string& source_sha256);
  std::vector<PoolEntry> pool(std::int64_t run_id);  // candidates that have verdicts, by id

  RunCounts counts(std::int64_t run_id);

  // Rewards: the rewards of one request are recorded together, in their order.
  void record_rewards(const std::vector<RewardRecord>& rewards);
  // The rewards of one request and the answer sent for them, in one transaction (the rewards'
  // answer_id is the answer's). Returns false, recording nothing, when answer(request_key,
  // within_seconds) finds one already: checked in the same transaction, so two processes never
  // both record the same request.
  bool record_answer(const AnswerRecord& answer, const std::vector<RewardRecord>& rewards,
                     std::optional<double> within_seconds = std::nullopt);
  // The latest answer recorded under `request_key`; with `within_seconds`, only one answered in
  // the last that many seconds.
  std::optional<AnswerRecord> answer(const std::string& request_key,
                                     std::optional<double> within_seconds = std::nullopt);
  // The raw rewards of the last `limit` rewards of a task, oldest first.
  std::vector<double> recent_raw_rewards(const std::string& task_key, std::size_t limit);
  // Every reward recorded, in order (reports and dataset exports).
  std::vector<RewardRecord> rewards();

 private:
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;  // one connection shared by the optimiser's threads
};

// ISO 8601 UTC timestamp of now, as stored.
std::string now_iso8601();

}  // namespace cudal1::store
