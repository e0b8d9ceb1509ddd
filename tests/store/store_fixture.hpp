// What the store tests share: a scratch directory per test, a store in it, records made with
// little typing, and a raw SQLite connection to check the file behind the store's back.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>

#include "cudal1/common/paths.hpp"
#include "cudal1/store/store.hpp"

namespace cudal1::store::testing {

inline std::filesystem::path scratch_directory() {
  return make_private_directory(std::filesystem::temp_directory_path(), "cudal1-store-test-");
}

// The first column of the first row of `sql`, as text ("" when there is no row), read through a
// connection of its own.
inline std::string query_text(const std::filesystem::path& database, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(database.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    ADD_FAILURE() << "cannot open " << database;
    return "";
  }
  sqlite3_stmt* statement = nullptr;
  std::string value;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  } else if (sqlite3_step(statement) == SQLITE_ROW) {
    const auto* text = sqlite3_column_text(statement, 0);
    value = text != nullptr ? reinterpret_cast<const char*>(text) : "NULL";
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

// Runs SQL that returns no rows through a connection of its own (creating the file when
// missing); returns SQLite's error or "".
inline std::string execute_raw(const std::filesystem::path& database, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open_v2(database.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    error = sqlite3_errmsg(db);
  } else {
    sqlite3_exec(db, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr);
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      error = sqlite3_errmsg(db);
    }
  }
  sqlite3_close(db);
  return error;
}

class StoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = scratch_directory();
    database_ = directory_ / "cudal1.db";
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(directory_);
  }

  Store& store() {
    if (!store_) store_ = std::make_unique<Store>(database_);
    return *store_;
  }
  void reopen() {
    store_.reset();
    store_ = std::make_unique<Store>(database_);
  }

  std::int64_t new_run(const std::string& model = "test-model") {
    const auto task = store().upsert_task("/tasks/19_ReLU.py", "class Model: pass\n");
    RunRecord run;
    run.task_id = task.id;
    run.model = model;
    run.llm = "cmd:scripted";
    run.options = {{"rounds", 2}, {"samples", 4}};
    return store().create_run(run);
  }

  PromptRecord new_prompt(std::int64_t run_id, int round, int sample,
                          std::vector<std::int64_t> exemplars = {}) {
    PromptRecord prompt;
    prompt.run_id = run_id;
    prompt.round = round;
    prompt.sample = sample;
    prompt.request = {{"model", "test-model"},
                      {"messages", {{{"role", "user"}, {"content", "make it faster"}}}}};
    prompt.exemplars = std::move(exemplars);
    return store().add_prompt(prompt);
  }

  static ResponseRecord response_to(std::int64_t prompt_id, std::int64_t prompt_tokens = 100,
                                    std::int64_t completion_tokens = 50,
                                    const std::string& content = "analysis, design, code") {
    ResponseRecord response;
    response.prompt_id = prompt_id;
    response.raw = {{"choices", {{{"message", {{"content", content}}}}}}};
    response.content = content;
    response.finish_reason = "stop";
    response.prompt_tokens = prompt_tokens;
    response.completion_tokens = completion_tokens;
    return response;
  }

  static CandidateRecord candidate_of(std::int64_t run_id, std::optional<std::int64_t> prompt_id,
                                      const std::string& source,
                                      const std::string& kind = "generated",
                                      std::vector<std::int64_t> parents = {}) {
    CandidateRecord candidate;
    candidate.run_id = run_id;
    candidate.prompt_id = prompt_id;
    candidate.kind = kind;
    candidate.source = source;
    candidate.analysis = "fuse the two kernels";
    candidate.parents = std::move(parents);
    return candidate;
  }

  static VerdictRecord verdict_of(std::int64_t candidate_id, std::optional<double> speedup,
                                  const std::string& status = "ok",
                                  std::optional<std::int64_t> duplicate_of = std::nullopt) {
    VerdictRecord verdict;
    verdict.candidate_id = candidate_id;
    verdict.status = status;
    verdict.speedup = speedup;
    verdict.reward = speedup ? *speedup : 0.0;
    verdict.verdict = {{"status", status},
                       {"speedup", speedup ? nlohmann::json(*speedup) : nullptr}};
    verdict.duplicate_of = duplicate_of;
    return verdict;
  }

  std::filesystem::path directory_;
  std::filesystem::path database_;
  std::unique_ptr<Store> store_;
};

}  // namespace cudal1::store::testing
