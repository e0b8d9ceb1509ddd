#include "cudal1/store/store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "cudal1/common/sha256.hpp"
#include "records.hpp"
#include "schema.hpp"
#include "statement.hpp"

namespace cudal1::store {
namespace {

// Long enough to outlast another process's transaction (each is one small insert or update:
// milliseconds, even with an fsync per commit on a slow disk), short enough that a writer that
// is stuck is reported instead of waited on for ever.
constexpr int kBusyTimeoutMs = 10000;

// Switching a file to WAL needs it to itself for a moment. While another connection opens the
// same new file, SQLite can answer the switch with SQLITE_BUSY at once, without the busy handler;
// the switch is retried (1, 2, 4 ... 50 ms apart) for as long as the busy timeout.
std::string switch_to_wal(sqlite3* db, const std::filesystem::path& path) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* statement = nullptr;
    int rc = sqlite3_prepare_v2(db, "PRAGMA journal_mode = WAL", -1, &statement, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(statement);
      if (rc == SQLITE_ROW) {
        const unsigned char* text = sqlite3_column_text(statement, 0);
        mode = text != nullptr ? reinterpret_cast<const char*>(text) : "";
      }
      rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(statement);
    if (rc == SQLITE_OK) return mode;
    const int primary = rc & 0xff;
    if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() >= deadline) {
      throw_store_error(db, path, "PRAGMA journal_mode = WAL");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, 1 << std::min(attempt, 6))));
  }
}

// Settings every connection needs. WAL lets readers (reports, a second cudal1) work while the
// optimiser writes; synchronous=FULL makes each commit durable before the call returns, so
// what a run has recorded survives a crash of the process or of the machine.
void configure(sqlite3* db, const std::filesystem::path& path) {
  if (sqlite3_db_readonly(db, "main") == 1) {
    throw StoreError(fmt::format(
        "store {}: opened read-only (the file or its directory is not writable); cudal1 records "
        "every prompt, response and verdict there: make it writable or use another --db",
        path.string()));
  }
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  execute(db, path, "PRAGMA synchronous = FULL");
  execute(db, path, "PRAGMA foreign_keys = ON");
  // Before the journal mode, which is stored in the file: a database that is not ours is left
  // as it was found.
  ensure_schema(db, path);
  const std::string journal = switch_to_wal(db, path);
  // An in-memory database (":memory:") has no journal file to put in WAL mode.
  if (journal != "wal" && journal != "memory") {
    throw StoreError(fmt::format(
        "store {}: the file system does not support a WAL journal (journal mode stays '{}'); put "
        "the database on a local disk",
        path.string(), journal));
  }
}

// Runs a query expected to return at most one row.
template <typename Reader, typename... Keys>
auto find_one(sqlite3* db, const std::filesystem::path& path, const std::string& sql, Reader read,
              const Keys&... keys)
    -> std::optional<decltype(read(std::declval<const Statement&>(), 0))> {
  Statement query(db, path, sql);
  query.bind_all(keys...);
  if (!query.step()) return std::nullopt;
  return read(query, 0);
}

template <typename Reader, typename... Keys>
auto find_all(sqlite3* db, const std::filesystem::path& path, const std::string& sql, Reader read,
              const Keys&... keys)
    -> std::vector<decltype(read(std::declval<const Statement&>(), 0))> {
  Statement query(db, path, sql);
  query.bind_all(keys...);
  std::vector<decltype(read(query, 0))> rows;
  while (query.step()) rows.push_back(read(query, 0));
  return rows;
}

std::int64_t read_id(const Statement& row, int first) {
  return row.int64(first);
}

std::string or_now(const std::string& timestamp) {
  return timestamp.empty() ? now_iso8601() : timestamp;
}

// The inserts that more than one method makes, each inside its caller's transaction.
std::int64_t insert_candidate(sqlite3* db, const std::filesystem::path& path,
                              const CandidateRecord& candidate) {
  const std::string sha256 =
      candidate.source_sha256.empty() ? sha256_hex(candidate.source) : candidate.source_sha256;
  Statement(db, path,
            "INSERT INTO candidates (run_id, prompt_id, kind, source, source_sha256, analysis, "
            "parents) VALUES (?, ?, ?, ?, ?, ?, ?)")
      .bind_all(candidate.run_id, candidate.prompt_id, candidate.kind, candidate.source, sha256,
                candidate.analysis, id_list_text(candidate.parents))
      .run();
  return sqlite3_last_insert_rowid(db);
}

void insert_verdict(sqlite3* db, const std::filesystem::path& path, const VerdictRecord& verdict) {
  Statement(db, path,
            "INSERT INTO verdicts (candidate_id, status, speedup, reward, verdict, duplicate_of, "
            "evaluated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (candidate_id) DO NOTHING")
      .bind_all(verdict.candidate_id, verdict.status, verdict.speedup, verdict.reward,
                json_text(verdict.verdict), verdict.duplicate_of, or_now(verdict.evaluated_at))
      .run();
}

std::optional<AnswerRecord> latest_answer(sqlite3* db, const std::filesystem::path& path,
                                          const std::string& request_key,
                                          std::optional<double> within_seconds) {
  // answered_at is written as now_iso8601() writes it, so the text compares as the time does.
  const std::string recent =
      within_seconds ? " AND a.answered_at >= strftime('%Y-%m-%dT%H:%M:%SZ', 'now', ?)" : "";
  Statement query(db, path,
                  fmt::format("SELECT {} FROM reward_answers a WHERE a.request_key = ?{} "
                              "ORDER BY a.id DESC LIMIT 1",
                              kAnswerColumns, recent));
  query.bind(1, request_key);
  if (within_seconds) query.bind(2, fmt::format("-{:.3f} seconds", *within_seconds));
  if (!query.step()) return std::nullopt;
  return read_answer(query, 0);
}

void insert_rewards(sqlite3* db, const std::filesystem::path& path,
                    const std::vector<RewardRecord>& rewards,
                    std::optional<std::int64_t> answer_id) {
  for (const auto& r : rewards) {
    Statement(db, path,
              "INSERT INTO rewards (task_key, candidate_id, request_id, step, group_id, status, "
              "raw_reward, reward, advantage, created_at, answer_id) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind_all(r.task_key, r.candidate_id, r.request_id, r.step, r.group, r.status, r.raw_reward,
                  r.reward, r.advantage, or_now(r.created_at), answer_id)
        .run();
  }
}

}  // namespace

Store::Store(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path_, ec)) {
    throw StoreError(fmt::format("store {}: is a directory; name a database file (e.g. cudal1.db)",
                                 path_.string()));
  }
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string message = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close_v2(db_);
    throw StoreError(
        fmt::format("store {}: cannot open: {}; check that the directory exists and is writable",
                    path_.string(), message));
  }
  try {
    configure(db_, path_);
  } catch (...) {
    sqlite3_close_v2(db_);
    throw;
  }
}

Store::~Store() {
  sqlite3_close_v2(db_);
}

TaskRecord Store::upsert_task(const std::string& path, const std::string& source) {
  std::lock_guard lock(mutex_);
  const std::string sha256 = sha256_hex(source);
  Transaction transaction(db_, path_);
  Statement(db_, path_,
            "INSERT INTO tasks (path, name, source, source_sha256) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (path, source_sha256) DO NOTHING")
      .bind_all(path, std::filesystem::path(path).stem().string(), source, sha256)
      .run();
  auto task = find_one(
      db_, path_,
      fmt::format("SELECT {} FROM tasks t WHERE t.path = ? AND t.source_sha256 = ?", kTaskColumns),
      read_task, path, sha256);
  transaction.commit();
  return std::move(task).value();
}

std::optional<TaskRecord> Store::task(std::int64_t id) {
  std::lock_guard lock(mutex_);
  return find_one(db_, path_, fmt::format("SELECT {} FROM tasks t WHERE t.id = ?", kTaskColumns),
                  read_task, id);
}

std::int64_t Store::create_run(const RunRecord& run) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  Statement(db_, path_,
            "INSERT INTO runs (task_id, model, llm, options, state, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)")
      .bind_all(run.task_id, run.model, run.llm, json_text(run.options), run.state,
                or_now(run.created_at))
      .run();
  const std::int64_t id = sqlite3_last_insert_rowid(db_);
  transaction.commit();
  return id;
}

std::optional<RunRecord> Store::run(std::int64_t id) {
  std::lock_guard lock(mutex_);
  return find_one(db_, path_, fmt::format("SELECT {} FROM runs r WHERE r.id = ?", kRunColumns),
                  read_run, id);
}

std::optional<RunRecord> Store::latest_run() {
  std::lock_guard lock(mutex_);
  return find_one(db_, path_,
                  fmt::format("SELECT {} FROM runs r ORDER BY r.id DESC LIMIT 1", kRunColumns),
                  read_run);
}

std::vector<RunRecord> Store::runs() {
  std::lock_guard lock(mutex_);
  return find_all(db_, path_, fmt::format("SELECT {} FROM runs r ORDER BY r.id", kRunColumns),
                  read_run);
}

void Store::set_run_state(std::int64_t run_id, const std::string& state) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  if (Statement(db_, path_, "UPDATE runs SET state = ? WHERE id = ?")
          .bind_all(state, run_id)
          .run() == 0) {
    throw StoreError(fmt::format("store {}: no run {}", path_.string(), run_id));
  }
  transaction.commit();
}

PromptRecord Store::add_prompt(const PromptRecord& prompt) {
  std::lock_guard lock(mutex_);
  PromptRecord added = prompt;
  added.custom_id = fmt::format("cudal1-{}-{}-{}", prompt.run_id, prompt.round, prompt.sample);
  added.state = "pending";
  added.error.clear();
  Transaction transaction(db_, path_);
  Statement(db_, path_,
            "INSERT INTO prompts (run_id, round, sample, custom_id, request, exemplars, state, "
            "error) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .bind_all(added.run_id, added.round, added.sample, added.custom_id, json_text(added.request),
                id_list_text(added.exemplars), added.state, added.error)
      .run();
  added.id = sqlite3_last_insert_rowid(db_);
  transaction.commit();
  return added;
}

std::vector<PromptRecord> Store::prompts(std::int64_t run_id) {
  std::lock_guard lock(mutex_);
  return find_all(
      db_, path_,
      fmt::format("SELECT {} FROM prompts p WHERE p.run_id = ? ORDER BY p.round, p.sample",
                  kPromptColumns),
      read_prompt, run_id);
}

std::optional<PromptRecord> Store::prompt_by_custom_id(const std::string& custom_id) {
  std::lock_guard lock(mutex_);
  return find_one(db_, path_,
                  fmt::format("SELECT {} FROM prompts p WHERE p.custom_id = ?", kPromptColumns),
                  read_prompt, custom_id);
}

void Store::mark_prompt_failed(std::int64_t prompt_id, const std::string& error) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  // An answered prompt stays answered: a failure reported late (a retry that timed out after
  // another attempt was recorded) must not hide a response the store holds.
  const int changed = Statement(db_, path_,
                                "UPDATE prompts SET state = 'failed', error = ? "
                                "WHERE id = ? AND state <> 'answered'")
                          .bind_all(error, prompt_id)
                          .run();
  if (changed == 0 &&
      !find_one(db_, path_, "SELECT id FROM prompts WHERE id = ?", read_id, prompt_id)) {
    throw StoreError(fmt::format("store {}: no prompt {}", path_.string(), prompt_id));
  }
  transaction.commit();
}

void Store::reset_prompt(std::int64_t prompt_id) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  Statement(db_, path_,
            "UPDATE prompts SET state = 'pending', error = '' WHERE id = ? AND state = 'failed'")
      .bind_all(prompt_id)
      .run();
  transaction.commit();
}

bool Store::record_response(const ResponseRecord& response) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  const int inserted =
      Statement(db_, path_,
                "INSERT INTO responses (prompt_id, raw, content, finish_reason, prompt_tokens, "
                "completion_tokens, received_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (prompt_id) DO NOTHING")
          .bind_all(response.prompt_id, json_text(response.raw), response.content,
                    response.finish_reason, response.prompt_tokens, response.completion_tokens,
                    or_now(response.received_at))
          .run();
  if (inserted == 0) return false;
  Statement(db_, path_, "UPDATE prompts SET state = 'answered', error = '' WHERE id = ?")
      .bind_all(response.prompt_id)
      .run();
  transaction.commit();
  return true;
}

std::optional<ResponseRecord> Store::response(std::int64_t prompt_id) {
  std::lock_guard lock(mutex_);
  return find_one(db_, path_,
                  fmt::format("SELECT {} FROM responses s WHERE s.prompt_id = ?", kResponseColumns),
                  read_response, prompt_id);
}

std::int64_t Store::add_candidate(const CandidateRecord& candidate) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  std::optional<std::int64_t> existing;
  if (candidate.prompt_id) {
    existing = find_one(db_, path_, "SELECT id FROM candidates WHERE prompt_id = ?", read_id,
                        *candidate.prompt_id);
  } else if (candidate.kind == "reference") {
    existing =
        find_one(db_, path_, "SELECT id FROM candidates WHERE run_id = ? AND kind = 'reference'",
                 read_id, candidate.run_id);
  }
  if (existing) return *existing;
  const std::int64_t id = insert_candidate(db_, path_, candidate);
  transaction.commit();
  return id;
}

std::int64_t Store::add_evaluated_candidate(const CandidateRecord& candidate,
                                            VerdictRecord verdict) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  verdict.candidate_id = insert_candidate(db_, path_, candidate);
  insert_verdict(db_, path_, verdict);
  transaction.commit();
  return verdict.candidate_id;
}

std::size_t Store::remove_unevaluated_candidates(std::int64_t run_id) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  // A candidate a reward or another verdict names stays: the foreign keys keep those rows
  // meaningful (an older server's reward for an evaluation the engine failed).
  const int removed = Statement(db_, path_, R"sql(
    DELETE FROM candidates WHERE run_id = ? AND kind = 'generated' AND prompt_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.candidate_id = candidates.id)
      AND NOT EXISTS (SELECT 1 FROM verdicts v WHERE v.duplicate_of = candidates.id)
      AND NOT EXISTS (SELECT 1 FROM rewards w WHERE w.candidate_id = candidates.id)
  )sql")
                          .bind_all(run_id)
                          .run();
  transaction.commit();
  return static_cast<std::size_t>(removed);
}

std::vector<CandidateRecord> Store::candidates(std::int64_t run_id) {
  std::lock_guard lock(mutex_);
  return find_all(db_, path_,
                  fmt::format("SELECT {} FROM candidates c WHERE c.run_id = ? ORDER BY c.id",
                              kCandidateColumns),
                  read_candidate, run_id);
}

std::optional<CandidateRecord> Store::candidate_for_prompt(std::int64_t prompt_id) {
  std::lock_guard lock(mutex_);
  return find_one(
      db_, path_,
      fmt::format("SELECT {} FROM candidates c WHERE c.prompt_id = ?", kCandidateColumns),
      read_candidate, prompt_id);
}

void Store::record_verdict(const VerdictRecord& verdict) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  insert_verdict(db_, path_, verdict);
  transaction.commit();
}

void Store::update_verdict(const VerdictRecord& verdict) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  if (Statement(db_, path_,
                "UPDATE verdicts SET status = ?, speedup = ?, reward = ?, verdict = ? "
                "WHERE candidate_id = ?")
          .bind_all(verdict.status, verdict.speedup, verdict.reward, json_text(verdict.verdict),
                    verdict.candidate_id)
          .run() == 0) {
    throw StoreError(
        fmt::format("store {}: candidate {} has no verdict", path_.string(), verdict.candidate_id));
  }
  transaction.commit();
}

std::optional<VerdictRecord> Store::verdict(std::int64_t candidate_id) {
  std::lock_guard lock(mutex_);
  return find_one(
      db_, path_,
      fmt::format("SELECT {} FROM verdicts v WHERE v.candidate_id = ?", kVerdictColumns),
      read_verdict, candidate_id);
}

std::optional<VerdictRecord> Store::verdict_for_source(std::int64_t run_id,
                                                       const std::string& source_sha256) {
  std::lock_guard lock(mutex_);
  // An original evaluation is preferred over a verdict that was itself copied from it.
  return find_one(
      db_, path_,
      fmt::format("SELECT {} FROM verdicts v JOIN candidates c ON c.id = v.candidate_id "
                  "WHERE c.run_id = ? AND c.source_sha256 = ? "
                  "ORDER BY v.duplicate_of IS NOT NULL, v.id LIMIT 1",
                  kVerdictColumns),
      read_verdict, run_id, source_sha256);
}

std::vector<PoolEntry> Store::pool(std::int64_t run_id) {
  std::lock_guard lock(mutex_);
  const auto read_entry = [](const Statement& row, int first) {
    return PoolEntry{read_candidate(row, first), read_verdict(row, first + kCandidateColumnCount)};
  };
  return find_all(db_, path_,
                  fmt::format("SELECT {}, {} FROM candidates c JOIN verdicts v "
                              "ON v.candidate_id = c.id WHERE c.run_id = ? ORDER BY c.id",
                              kCandidateColumns, kVerdictColumns),
                  read_entry, run_id);
}

RunCounts Store::counts(std::int64_t run_id) {
  std::lock_guard lock(mutex_);
  // One statement, so every number comes from the same snapshot of the database.
  Statement query(db_, path_, R"sql(
    SELECT
      (SELECT count(*) FROM prompts WHERE run_id = ?1),
      (SELECT count(*) FROM prompts WHERE run_id = ?1 AND state = 'pending'),
      (SELECT count(*) FROM prompts WHERE run_id = ?1 AND state = 'answered'),
      (SELECT count(*) FROM prompts WHERE run_id = ?1 AND state = 'failed'),
      (SELECT count(*) FROM candidates WHERE run_id = ?1 AND kind IN ('generated', 'unparseable')),
      (SELECT count(*) FROM verdicts v JOIN candidates c ON c.id = v.candidate_id
         WHERE c.run_id = ?1 AND c.kind = 'generated' AND v.duplicate_of IS NULL),
      (SELECT coalesce(sum(s.prompt_tokens), 0) FROM responses s JOIN prompts p
         ON p.id = s.prompt_id WHERE p.run_id = ?1),
      (SELECT coalesce(sum(s.completion_tokens), 0) FROM responses s JOIN prompts p
         ON p.id = s.prompt_id WHERE p.run_id = ?1)
  )sql");
  query.bind(1, run_id);
  query.step();
  RunCounts counts;
  counts.prompts = query.int64(0);
  counts.pending = query.int64(1);
  counts.answered = query.int64(2);
  counts.failed = query.int64(3);
  counts.candidates = query.int64(4);
  counts.evaluations = query.int64(5);
  counts.prompt_tokens = query.int64(6);
  counts.completion_tokens = query.int64(7);
  return counts;
}

void Store::record_rewards(const std::vector<RewardRecord>& rewards) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  insert_rewards(db_, path_, rewards, std::nullopt);
  transaction.commit();
}

bool Store::record_answer(const AnswerRecord& answer, const std::vector<RewardRecord>& rewards,
                          std::optional<double> within_seconds) {
  std::lock_guard lock(mutex_);
  Transaction transaction(db_, path_);
  if (latest_answer(db_, path_, answer.request_key, within_seconds)) return false;
  Statement(db_, path_,
            "INSERT INTO reward_answers (request_key, request_id, endpoint, body, answered_at) "
            "VALUES (?, ?, ?, ?, ?)")
      .bind_all(answer.request_key, answer.request_id, answer.endpoint, answer.body,
                or_now(answer.answered_at))
      .run();
  insert_rewards(db_, path_, rewards, sqlite3_last_insert_rowid(db_));
  transaction.commit();
  return true;
}

std::optional<AnswerRecord> Store::answer(const std::string& request_key,
                                          std::optional<double> within_seconds) {
  std::lock_guard lock(mutex_);
  return latest_answer(db_, path_, request_key, within_seconds);
}

std::vector<double> Store::recent_raw_rewards(const std::string& task_key, std::size_t limit) {
  std::lock_guard lock(mutex_);
  auto newest_first = find_all(
      db_, path_,
      "SELECT w.raw_reward FROM rewards w WHERE w.task_key = ? AND w.status != 'task_error' "
      "ORDER BY w.id DESC LIMIT ?",
      [](const Statement& row, int first) { return row.real(first); }, task_key,
      static_cast<std::int64_t>(limit));
  return {newest_first.rbegin(), newest_first.rend()};
}

std::vector<RewardRecord> Store::rewards() {
  std::lock_guard lock(mutex_);
  return find_all(db_, path_, fmt::format("SELECT {} FROM rewards w ORDER BY w.id", kRewardColumns),
                  read_reward);
}

}  // namespace cudal1::store
