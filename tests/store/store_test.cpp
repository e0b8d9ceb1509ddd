// The store's API one method at a time: what it records, what it reads back, and what it refuses.
#include "cudal1/store/store.hpp"

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <regex>

#include "cudal1/common/sha256.hpp"
#include "store_fixture.hpp"

namespace cudal1::store::testing {
namespace {

class StoreSchema : public StoreFixture {};
class StoreTasks : public StoreFixture {};
class StoreRuns : public StoreFixture {};
class StorePrompts : public StoreFixture {};
class StoreResponses : public StoreFixture {};
class StoreCandidates : public StoreFixture {};
class StoreVerdicts : public StoreFixture {};
class StoreCounts : public StoreFixture {};
class StorePool : public StoreFixture {};

TEST_F(StoreSchema, FirstOpenCreatesTablesVersionAndWalJournal) {
  store();
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "3");
  EXPECT_EQ(query_text(database_, "PRAGMA journal_mode"), "wal");
  const auto tables = query_text(
      database_,
      "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_schema WHERE type = 'table' "
      "ORDER BY name)");
  EXPECT_EQ(tables, "candidates,prompts,responses,reward_answers,rewards,runs,tasks,verdicts");
  EXPECT_EQ(query_text(database_,
                       "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND "
                       "name = 'candidates_one_reference_per_run'"),
            "1");
}

TEST_F(StoreSchema, ReopenKeepsEverythingRecorded) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  ASSERT_TRUE(store().record_response(response_to(prompt.id, 7, 9)));
  const auto candidate_id =
      store().add_candidate(candidate_of(run_id, prompt.id, "class ModelNew"));
  store().record_verdict(verdict_of(candidate_id, 1.5));
  reopen();
  reopen();  // a second open of an existing store must not try to create the tables again
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "3");
  ASSERT_TRUE(store().run(run_id));
  EXPECT_EQ(store().prompts(run_id).size(), 1u);
  ASSERT_TRUE(store().response(prompt.id));
  EXPECT_EQ(store().response(prompt.id)->completion_tokens, 9);
  ASSERT_TRUE(store().candidate_for_prompt(prompt.id));
  EXPECT_EQ(store().candidate_for_prompt(prompt.id)->id, candidate_id);
  ASSERT_TRUE(store().verdict(candidate_id));
  EXPECT_EQ(store().verdict(candidate_id)->speedup, 1.5);
}

TEST_F(StoreSchema, ForeignKeysAreEnforced) {
  RunRecord orphan_run;
  orphan_run.task_id = 999;
  EXPECT_THROW(store().create_run(orphan_run), StoreError);
  EXPECT_THROW(new_prompt(999, 0, 0), StoreError);
  EXPECT_THROW(store().add_candidate(candidate_of(999, std::nullopt, "x")), StoreError);
  EXPECT_THROW(store().record_verdict(verdict_of(999, 1.0)), StoreError);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM runs"), "0");
}

TEST_F(StoreSchema, NewerSchemaIsRefused) {
  store();
  store_.reset();
  ASSERT_EQ(execute_raw(database_, "PRAGMA user_version = 4"), "");
  try {
    store();
    FAIL() << "opened a store of schema version 4";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find(database_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  }
}

TEST_F(StoreSchema, OtherProgramsDatabaseIsRefused) {
  ASSERT_EQ(execute_raw(database_, "CREATE TABLE tasks (todo TEXT)"), "");
  EXPECT_THROW(store(), StoreError);
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "0");
  EXPECT_EQ(query_text(database_, "PRAGMA journal_mode"), "delete");  // left as it was found
}

TEST_F(StoreTasks, UpsertKeepsOneRowPerPathAndSource) {
  const auto first = store().upsert_task("/tasks/19_ReLU.py", "relu v1\n");
  EXPECT_GT(first.id, 0);
  EXPECT_EQ(first.name, "19_ReLU");
  EXPECT_EQ(first.path, "/tasks/19_ReLU.py");
  EXPECT_EQ(first.source, "relu v1\n");
  EXPECT_EQ(first.source_sha256, sha256_hex("relu v1\n"));
  EXPECT_EQ(store().upsert_task("/tasks/19_ReLU.py", "relu v1\n").id, first.id);
  const auto edited = store().upsert_task("/tasks/19_ReLU.py", "relu v2\n");
  const auto moved = store().upsert_task("/elsewhere/19_ReLU.py", "relu v1\n");
  EXPECT_NE(edited.id, first.id);
  EXPECT_NE(moved.id, first.id);
  EXPECT_NE(moved.id, edited.id);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM tasks"), "3");
  const auto read = store().task(first.id);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->source, "relu v1\n");
  EXPECT_EQ(read->name, "19_ReLU");
  EXPECT_FALSE(store().task(first.id + 100));
}

TEST_F(StoreRuns, CreateReadLatestAndFinish) {
  EXPECT_FALSE(store().latest_run());
  const auto first = new_run("model-a");
  const auto second = new_run("model-b");
  EXPECT_NE(first, second);
  const auto run = store().run(first);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->model, "model-a");
  EXPECT_EQ(run->llm, "cmd:scripted");
  EXPECT_EQ(run->options.at("samples"), 4);
  EXPECT_EQ(run->state, "active");
  EXPECT_TRUE(std::regex_match(run->created_at, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")))
      << run->created_at;
  ASSERT_TRUE(store().latest_run());
  EXPECT_EQ(store().latest_run()->id, second);
  const auto all = store().runs();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, first);
  EXPECT_EQ(all[1].model, "model-b");
  store().set_run_state(first, "finished");
  EXPECT_EQ(store().run(first)->state, "finished");
  EXPECT_EQ(store().run(second)->state, "active");
  EXPECT_THROW(store().set_run_state(first, "exploded"), StoreError);
  EXPECT_EQ(store().run(first)->state, "finished");
  EXPECT_THROW(store().set_run_state(second + 100, "finished"), StoreError);
  EXPECT_FALSE(store().run(second + 100));
}

TEST_F(StoreRuns, KeepsGivenCreationTime) {
  const auto task = store().upsert_task("t.py", "x");
  RunRecord run;
  run.task_id = task.id;
  run.created_at = "2026-11-21T23:59:01Z";
  EXPECT_EQ(store().run(store().create_run(run))->created_at, "2026-11-21T23:59:01Z");
}

TEST_F(StorePrompts, AddAssignsIdCustomIdAndPendingState) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 3, 7, {11, 12});
  EXPECT_GT(prompt.id, 0);
  EXPECT_EQ(prompt.custom_id, "cudal1-" + std::to_string(run_id) + "-3-7");
  EXPECT_EQ(prompt.state, "pending");
  const auto read = store().prompt_by_custom_id(prompt.custom_id);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->id, prompt.id);
  EXPECT_EQ(read->run_id, run_id);
  EXPECT_EQ(read->round, 3);
  EXPECT_EQ(read->sample, 7);
  EXPECT_EQ(read->exemplars, (std::vector<std::int64_t>{11, 12}));
  EXPECT_EQ(read->request.at("messages").at(0).at("content"), "make it faster");
  EXPECT_EQ(read->state, "pending");
  EXPECT_FALSE(store().prompt_by_custom_id("cudal1-999-0-0"));
}

TEST_F(StorePrompts, CustomIdIsUniqueInTheStore) {
  const auto run_a = new_run();
  const auto run_b = new_run();
  const auto a = new_prompt(run_a, 0, 1);
  const auto b = new_prompt(run_b, 0, 1);
  EXPECT_NE(a.custom_id, b.custom_id);
  EXPECT_THROW(new_prompt(run_a, 0, 1), StoreError);
  EXPECT_EQ(store().prompts(run_a).size(), 1u);
  // The schema refuses a second row with the same custom_id, whoever writes it.
  EXPECT_NE(
      execute_raw(database_,
                  "INSERT INTO prompts (run_id, round, sample, custom_id, request, exemplars, "
                  "state) VALUES (" +
                      std::to_string(run_b) + ", 5, 5, '" + a.custom_id +
                      "', '{}', '[]', 'pending')"),
      "");
}

TEST_F(StorePrompts, ListedByRoundThenSampleForTheirRunOnly) {
  const auto run_id = new_run();
  const auto other = new_run();
  new_prompt(run_id, 1, 0);
  new_prompt(run_id, 0, 1);
  new_prompt(other, 0, 0);
  new_prompt(run_id, 0, 0);
  new_prompt(run_id, 1, 2);
  std::vector<std::string> order;
  for (const auto& prompt : store().prompts(run_id)) {
    order.push_back(std::to_string(prompt.round) + "." + std::to_string(prompt.sample));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"0.0", "0.1", "1.0", "1.2"}));
  EXPECT_TRUE(store().prompts(other + 100).empty());
}

TEST_F(StorePrompts, FailedPromptKeepsItsErrorButAnAnsweredOneStaysAnswered) {
  const auto run_id = new_run();
  const auto failing = new_prompt(run_id, 0, 0);
  const auto answered = new_prompt(run_id, 0, 1);
  store().mark_prompt_failed(failing.id, "HTTP 500 after 3 attempts");
  auto read = store().prompt_by_custom_id(failing.custom_id);
  EXPECT_EQ(read->state, "failed");
  EXPECT_EQ(read->error, "HTTP 500 after 3 attempts");
  ASSERT_TRUE(store().record_response(response_to(answered.id)));
  store().mark_prompt_failed(answered.id, "late timeout");
  read = store().prompt_by_custom_id(answered.custom_id);
  EXPECT_EQ(read->state, "answered");
  EXPECT_EQ(read->error, "");
  EXPECT_THROW(store().mark_prompt_failed(answered.id + 100, "no such prompt"), StoreError);
}

TEST_F(StorePrompts, ResetMakesOnlyFailedPromptsPendingAgain) {
  const auto run_id = new_run();
  const auto failed = new_prompt(run_id, 0, 0);
  const auto answered = new_prompt(run_id, 0, 1);
  store().mark_prompt_failed(failed.id, "empty reply");
  ASSERT_TRUE(store().record_response(response_to(answered.id)));
  store().reset_prompt(failed.id);
  store().reset_prompt(answered.id);
  const auto reset = store().prompt_by_custom_id(failed.custom_id);
  EXPECT_EQ(reset->state, "pending");
  EXPECT_EQ(reset->error, "");
  EXPECT_EQ(store().prompt_by_custom_id(answered.custom_id)->state, "answered");
  EXPECT_EQ(store().counts(run_id).failed, 0);
}

TEST_F(StoreResponses, RecordingMarksThePromptAnswered) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  EXPECT_FALSE(store().response(prompt.id));
  ASSERT_TRUE(store().record_response(response_to(prompt.id, 123, 45, "the answer")));
  const auto response = store().response(prompt.id);
  ASSERT_TRUE(response);
  EXPECT_EQ(response->content, "the answer");
  EXPECT_EQ(response->finish_reason, "stop");
  EXPECT_EQ(response->prompt_tokens, 123);
  EXPECT_EQ(response->completion_tokens, 45);
  EXPECT_EQ(response->raw.at("choices").at(0).at("message").at("content"), "the answer");
  EXPECT_FALSE(response->received_at.empty());
  EXPECT_EQ(store().prompt_by_custom_id(prompt.custom_id)->state, "answered");
}

TEST_F(StoreResponses, SecondResponseIsRefusedAndChangesNothing) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  ASSERT_TRUE(store().record_response(response_to(prompt.id, 10, 20, "first")));
  EXPECT_FALSE(store().record_response(response_to(prompt.id, 99, 99, "second")));
  const auto response = store().response(prompt.id);
  EXPECT_EQ(response->content, "first");
  EXPECT_EQ(response->prompt_tokens, 10);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM responses"), "1");
  EXPECT_EQ(store().counts(run_id).completion_tokens, 20);
}

TEST_F(StoreResponses, AnsweringAFailedPromptClearsTheFailure) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  store().mark_prompt_failed(prompt.id, "timeout");
  ASSERT_TRUE(store().record_response(response_to(prompt.id)));
  const auto read = store().prompt_by_custom_id(prompt.custom_id);
  EXPECT_EQ(read->state, "answered");
  EXPECT_EQ(read->error, "");
}

TEST_F(StoreResponses, ResponseToAnUnknownPromptIsAnError) {
  new_run();
  EXPECT_THROW(store().record_response(response_to(12345)), StoreError);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM responses"), "0");
}

TEST_F(StoreCandidates, AddedCandidatesReadBackInOrder) {
  const auto run_id = new_run();
  const auto prompt_a = new_prompt(run_id, 0, 0);
  const auto prompt_b = new_prompt(run_id, 0, 1);
  const auto reference =
      store().add_candidate(candidate_of(run_id, std::nullopt, "ref", "reference"));
  const auto a =
      store().add_candidate(candidate_of(run_id, prompt_a.id, "a", "generated", {reference}));
  const auto b = store().add_candidate(candidate_of(run_id, prompt_b.id, "", "unparseable"));
  const auto listed = store().candidates(run_id);
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].id, reference);
  EXPECT_EQ(listed[0].kind, "reference");
  EXPECT_FALSE(listed[0].prompt_id);
  EXPECT_EQ(listed[1].id, a);
  EXPECT_EQ(listed[1].parents, (std::vector<std::int64_t>{reference}));
  EXPECT_EQ(listed[1].analysis, "fuse the two kernels");
  EXPECT_EQ(listed[1].source_sha256, sha256_hex("a"));  // filled in when not given
  EXPECT_EQ(listed[2].id, b);
  EXPECT_EQ(listed[2].kind, "unparseable");
  const auto for_prompt = store().candidate_for_prompt(prompt_a.id);
  ASSERT_TRUE(for_prompt);
  EXPECT_EQ(for_prompt->id, a);
  EXPECT_EQ(for_prompt->prompt_id, prompt_a.id);
  EXPECT_FALSE(store().candidate_for_prompt(prompt_b.id + 100));
}

TEST_F(StoreCandidates, GivenSourceHashIsKept) {
  const auto run_id = new_run();
  auto candidate = candidate_of(run_id, std::nullopt, "x = 1\n");
  candidate.source_sha256 = "normalised-hash";
  const auto id = store().add_candidate(candidate);
  EXPECT_EQ(store().candidates(run_id).at(0).id, id);
  EXPECT_EQ(store().candidates(run_id).at(0).source_sha256, "normalised-hash");
}

TEST_F(StoreCandidates, OneCandidatePerPrompt) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  const auto first = store().add_candidate(candidate_of(run_id, prompt.id, "first"));
  EXPECT_EQ(store().add_candidate(candidate_of(run_id, prompt.id, "second")), first);
  const auto listed = store().candidates(run_id);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].source, "first");
}

TEST_F(StoreCandidates, OneReferencePerRun) {
  const auto run_id = new_run();
  const auto other = new_run();
  const auto reference =
      store().add_candidate(candidate_of(run_id, std::nullopt, "r", "reference"));
  EXPECT_EQ(store().add_candidate(candidate_of(run_id, std::nullopt, "r2", "reference")),
            reference);
  EXPECT_NE(store().add_candidate(candidate_of(other, std::nullopt, "r", "reference")), reference);
  // The schema itself refuses a second reference, and a reference that answers a prompt.
  EXPECT_NE(execute_raw(database_,
                        "INSERT INTO candidates (run_id, kind, source, source_sha256, analysis, "
                        "parents) VALUES (" +
                            std::to_string(run_id) + ", 'reference', 'r3', 'h', '', '[]')"),
            "");
  const auto prompt = new_prompt(run_id, 0, 0);
  EXPECT_THROW(store().add_candidate(candidate_of(run_id, prompt.id, "r", "reference")),
               StoreError);
  EXPECT_EQ(store().candidates(run_id).size(), 1u);
}

TEST_F(StoreCandidates, CandidatesWithoutPromptMayBeMany) {
  const auto run_id = new_run();
  const auto a = store().add_candidate(candidate_of(run_id, std::nullopt, "imported a"));
  const auto b = store().add_candidate(candidate_of(run_id, std::nullopt, "imported b"));
  EXPECT_NE(a, b);
  EXPECT_EQ(store().candidates(run_id).size(), 2u);
}

TEST_F(StoreCandidates, UnknownKindIsRefused) {
  const auto run_id = new_run();
  EXPECT_THROW(store().add_candidate(candidate_of(run_id, std::nullopt, "x", "hacked")),
               StoreError);
}

TEST_F(StoreVerdicts, RecordedOnceAndReadBack) {
  const auto run_id = new_run();
  const auto first = store().add_candidate(candidate_of(run_id, std::nullopt, "same"));
  const auto copy = store().add_candidate(candidate_of(run_id, std::nullopt, "same"));
  store().record_verdict(verdict_of(first, 2.25));
  store().record_verdict(verdict_of(first, 9.0));  // ignored: the first verdict stands
  store().record_verdict(verdict_of(copy, 2.25, "ok", first));
  const auto verdict = store().verdict(first);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->status, "ok");
  EXPECT_EQ(verdict->speedup, 2.25);
  EXPECT_EQ(verdict->reward, 2.25);
  EXPECT_EQ(verdict->verdict.at("speedup"), 2.25);
  EXPECT_FALSE(verdict->duplicate_of);
  EXPECT_FALSE(verdict->evaluated_at.empty());
  EXPECT_EQ(store().verdict(copy)->duplicate_of, first);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM verdicts"), "2");
  EXPECT_FALSE(store().verdict(copy + 100));
}

TEST_F(StoreVerdicts, UntimedVerdictHasNoSpeedup) {
  const auto run_id = new_run();
  const auto id = store().add_candidate(candidate_of(run_id, std::nullopt, "broken"));
  store().record_verdict(verdict_of(id, std::nullopt, "compile_error"));
  const auto verdict = store().verdict(id);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->status, "compile_error");
  EXPECT_FALSE(verdict->speedup);
  EXPECT_EQ(verdict->reward, 0.0);
  EXPECT_TRUE(verdict->verdict.at("speedup").is_null());
}

TEST_F(StoreVerdicts, VerdictForSourceFindsAnEvaluationOfTheSameSourceInTheRun) {
  const auto run_id = new_run();
  const auto other_run = new_run();
  const auto sha = sha256_hex("fast");
  EXPECT_FALSE(store().verdict_for_source(run_id, sha));
  const auto original = store().add_candidate(candidate_of(run_id, std::nullopt, "fast"));
  EXPECT_FALSE(store().verdict_for_source(run_id, sha));  // not evaluated yet
  const auto duplicate = store().add_candidate(candidate_of(run_id, std::nullopt, "fast"));
  store().record_verdict(verdict_of(duplicate, 3.0, "ok", original));
  store().record_verdict(verdict_of(original, 3.0));
  const auto found = store().verdict_for_source(run_id, sha);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->candidate_id, original);  // the real evaluation, not the copy
  EXPECT_EQ(found->speedup, 3.0);
  EXPECT_FALSE(store().verdict_for_source(other_run, sha));
  EXPECT_FALSE(store().verdict_for_source(run_id, sha256_hex("slow")));
}

TEST_F(StoreCounts, CountsPromptsCandidatesEvaluationsAndTokens) {
  const auto run_id = new_run();
  const auto other = new_run();
  std::vector<PromptRecord> prompts;
  for (int sample = 0; sample < 4; ++sample) prompts.push_back(new_prompt(run_id, 0, sample));
  ASSERT_TRUE(store().record_response(response_to(prompts[0].id, 10, 20)));
  ASSERT_TRUE(store().record_response(response_to(prompts[1].id, 30, 40)));
  store().mark_prompt_failed(prompts[2].id, "refused");
  const auto reference =
      store().add_candidate(candidate_of(run_id, std::nullopt, "ref", "reference"));
  const auto original = store().add_candidate(candidate_of(run_id, prompts[0].id, "same"));
  const auto duplicate = store().add_candidate(candidate_of(run_id, prompts[1].id, "same"));
  const auto unparseable =
      store().add_candidate(candidate_of(run_id, prompts[3].id, "", "unparseable"));
  store().record_verdict(verdict_of(reference, 1.0));
  store().record_verdict(verdict_of(original, 1.7));
  store().record_verdict(verdict_of(duplicate, 1.7, "ok", original));
  store().record_verdict(verdict_of(unparseable, std::nullopt, "unparseable"));
  // Another run's records must not leak into these counts.
  const auto foreign = new_prompt(other, 0, 0);
  ASSERT_TRUE(store().record_response(response_to(foreign.id, 1000, 1000)));
  store().record_verdict(
      verdict_of(store().add_candidate(candidate_of(other, foreign.id, "other")), 1.1));

  const auto counts = store().counts(run_id);
  EXPECT_EQ(counts.prompts, 4);
  EXPECT_EQ(counts.pending, 1);
  EXPECT_EQ(counts.answered, 2);
  EXPECT_EQ(counts.failed, 1);
  EXPECT_EQ(counts.candidates, 3);
  EXPECT_EQ(counts.evaluations, 1);
  EXPECT_EQ(counts.prompt_tokens, 40);
  EXPECT_EQ(counts.completion_tokens, 60);
}

TEST_F(StoreCounts, EmptyRunCountsNothing) {
  const auto counts = store().counts(new_run());
  EXPECT_EQ(counts.prompts + counts.pending + counts.answered + counts.failed, 0);
  EXPECT_EQ(counts.candidates + counts.evaluations, 0);
  EXPECT_EQ(counts.prompt_tokens + counts.completion_tokens, 0);
}

TEST_F(StorePool, HoldsTheRunsEvaluatedCandidatesByIdWithTheirVerdicts) {
  const auto run_id = new_run();
  const auto other = new_run();
  const auto slow = store().add_candidate(candidate_of(run_id, std::nullopt, "slow"));
  const auto reference =
      store().add_candidate(candidate_of(run_id, std::nullopt, "ref", "reference"));
  const auto pending = store().add_candidate(candidate_of(run_id, std::nullopt, "not yet timed"));
  const auto fast =
      store().add_candidate(candidate_of(run_id, std::nullopt, "fast", "generated", {slow}));
  store().record_verdict(verdict_of(fast, 4.0));
  store().record_verdict(verdict_of(reference, 1.0));
  store().record_verdict(verdict_of(slow, 0.5));
  store().record_verdict(
      verdict_of(store().add_candidate(candidate_of(other, std::nullopt, "x")), 9.0));
  const auto pool = store().pool(run_id);
  std::vector<std::int64_t> ids;
  for (const auto& entry : pool) {
    ids.push_back(entry.candidate.id);
    EXPECT_EQ(entry.verdict.candidate_id, entry.candidate.id);
  }
  EXPECT_EQ(ids, (std::vector<std::int64_t>{slow, reference, fast}));
  EXPECT_EQ(pool[1].candidate.kind, "reference");
  EXPECT_EQ(pool[2].candidate.source, "fast");
  EXPECT_EQ(pool[2].candidate.parents, (std::vector<std::int64_t>{slow}));
  EXPECT_EQ(pool[2].verdict.speedup, 4.0);
  EXPECT_EQ(pool[0].verdict.verdict.at("speedup"), 0.5);
  EXPECT_EQ(std::find(ids.begin(), ids.end(), pending), ids.end());
}

TEST(StoreTimestamp, NowIsIso8601Utc) {
  // A local time zone far from UTC (POSIX form, needs no tzdata), so a local-time stamp shows.
  ::setenv("TZ", "IST-5:30", 1);
  ::tzset();
  const std::time_t before = std::time(nullptr);
  const auto now = now_iso8601();
  ::unsetenv("TZ");
  ::tzset();
  ASSERT_TRUE(std::regex_match(now, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << now;
  std::tm parsed{};
  ASSERT_NE(strptime(now.c_str(), "%Y-%m-%dT%H:%M:%SZ", &parsed), nullptr);
  // Read back as UTC it must be this very moment; a local-time stamp would be hours off.
  EXPECT_LE(std::abs(timegm(&parsed) - before), 2) << now;
}

}  // namespace
}  // namespace cudal1::store::testing
