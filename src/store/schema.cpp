#include "schema.hpp"

#include <fmt/format.h>

#include <iterator>

#include "cudal1/store/store.hpp"
#include "statement.hpp"

namespace cudal1::store {
namespace {

// JSON documents (options, request, raw, verdict) and id lists (exemplars, parents) are TEXT
// holding JSON: they are written and read whole, never queried inside.
constexpr const char* kCreateTables = R"sql(
CREATE TABLE tasks (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  source_sha256 TEXT NOT NULL,
  UNIQUE (path, source_sha256)
);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  task_id INTEGER NOT NULL REFERENCES tasks (id),
  model TEXT NOT NULL,
  llm TEXT NOT NULL,
  options TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('active', 'finished')),
  created_at TEXT NOT NULL
);
CREATE INDEX runs_by_task ON runs (task_id);

CREATE TABLE prompts (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  round INTEGER NOT NULL,
  sample INTEGER NOT NULL,
  custom_id TEXT NOT NULL UNIQUE,
  request TEXT NOT NULL,
  exemplars TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'answered', 'failed')),
  error TEXT NOT NULL DEFAULT '',
  UNIQUE (run_id, round, sample)
);

CREATE TABLE responses (
  id INTEGER PRIMARY KEY,
  prompt_id INTEGER NOT NULL UNIQUE REFERENCES prompts (id),
  raw TEXT NOT NULL,
  content TEXT NOT NULL,
  finish_reason TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  received_at TEXT NOT NULL
);

-- A NULL prompt_id is allowed any number of times (UNIQUE ignores NULLs); the reference that
-- seeds a run's pool is the one candidate per run that must have none.
CREATE TABLE candidates (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  prompt_id INTEGER UNIQUE REFERENCES prompts (id),
  kind TEXT NOT NULL CHECK (kind IN ('reference', 'generated', 'unparseable')),
  source TEXT NOT NULL,
  source_sha256 TEXT NOT NULL,
  analysis TEXT NOT NULL,
  parents TEXT NOT NULL,
  CHECK (kind <> 'reference' OR prompt_id IS NULL)
);
CREATE UNIQUE INDEX candidates_one_reference_per_run ON candidates (run_id)
  WHERE kind = 'reference';
CREATE INDEX candidates_by_source ON candidates (run_id, source_sha256);

CREATE TABLE verdicts (
  id INTEGER PRIMARY KEY,
  candidate_id INTEGER NOT NULL UNIQUE REFERENCES candidates (id),
  status TEXT NOT NULL,
  speedup REAL,
  reward REAL NOT NULL,
  verdict TEXT NOT NULL,
  duplicate_of INTEGER REFERENCES candidates (id),
  evaluated_at TEXT NOT NULL
);
)sql";

// Version 2: the rewards handed to trainers (cudal1 serve), in the order they were given, so a
// restarted server smooths on from the same history and reports can follow training.
constexpr const char* kCreateRewardTables = R"sql(
CREATE TABLE rewards (
  id INTEGER PRIMARY KEY,
  task_key TEXT NOT NULL,
  candidate_id INTEGER REFERENCES candidates (id),
  request_id TEXT NOT NULL,
  step INTEGER,
  group_id TEXT,
  status TEXT NOT NULL,
  raw_reward REAL NOT NULL,
  reward REAL NOT NULL,
  advantage REAL,
  created_at TEXT NOT NULL
);
CREATE INDEX rewards_by_task ON rewards (task_key, id);
)sql";

// Version 3: the answer sent for each reward request, under a key that outlives the server (the
// SHA-256 of the endpoint and the request body), written in the same transaction as the
// request's rewards. A request sent again, after a restart too, is answered from here and adds
// no rewards; each reward row names the answer it was part of (NULL for rows of version 2). A key
// may come back as a new request once its replay time is over, hence no UNIQUE.
constexpr const char* kCreateAnswerTables = R"sql(
CREATE TABLE reward_answers (
  id INTEGER PRIMARY KEY,
  request_key TEXT NOT NULL,
  request_id TEXT NOT NULL,
  endpoint TEXT NOT NULL,
  body TEXT NOT NULL,
  answered_at TEXT NOT NULL
);
CREATE INDEX reward_answers_by_key ON reward_answers (request_key, id);
ALTER TABLE rewards ADD COLUMN answer_id INTEGER REFERENCES reward_answers (id);
)sql";

// kUpgrades[v] takes a store from version v to v + 1 (version 0: an empty file).
constexpr const char* kUpgrades[] = {kCreateTables, kCreateRewardTables, kCreateAnswerTables};
static_assert(std::size(kUpgrades) == static_cast<std::size_t>(kSchemaVersion));

int user_version(sqlite3* db, const std::filesystem::path& path) {
  Statement query(db, path, "PRAGMA user_version");
  query.step();
  return static_cast<int>(query.int64(0));
}

bool empty(sqlite3* db, const std::filesystem::path& path) {
  Statement query(db, path, "SELECT count(*) FROM sqlite_schema");
  query.step();
  return query.int64(0) == 0;
}

}  // namespace

void ensure_schema(sqlite3* db, const std::filesystem::path& path) {
  // Reading the schema now, not at the first query of a run, reports a damaged file on open.
  empty(db, path);
  if (user_version(db, path) == kSchemaVersion) return;
  // Two processes opening a new database at once both see version 0; the write lock makes the
  // second one wait and then find the tables made.
  Transaction transaction(db, path);
  const int version = user_version(db, path);
  if (version == kSchemaVersion) return;
  if (version > kSchemaVersion) {
    throw StoreError(fmt::format(
        "store {}: schema version {} is newer than this cudal1 understands ({}); use a newer "
        "cudal1 or another --db",
        path.string(), version, kSchemaVersion));
  }
  if (version < 0) {
    throw StoreError(fmt::format("store {}: unknown schema version {}; use another --db",
                                 path.string(), version));
  }
  if (version == 0 && !empty(db, path)) {
    throw StoreError(fmt::format(
        "store {}: an SQLite database of some other program (tables but no cudal1 schema "
        "version); use another --db",
        path.string()));
  }
  // An older store keeps everything it holds and gains what later versions added.
  for (int step = version; step < kSchemaVersion; ++step) execute(db, path, kUpgrades[step]);
  execute(db, path, fmt::format("PRAGMA user_version = {}", kSchemaVersion).c_str());
  transaction.commit();
}

}  // namespace cudal1::store
