// Many threads on one Store, and several connections on one file: every record arrives once.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "cudal1/store/store.hpp"
#include "store_fixture.hpp"

namespace cudal1::store::testing {
namespace {

class StoreThreads : public StoreFixture {};

// Enough threads and records that unguarded use of the one connection would interleave
// statements of different calls (and crash or lose rows) within a test of a few seconds.
constexpr int kThreads = 8;
constexpr int kRecordsPerThread = 25;

// What one optimiser worker does for one sample: prompt, response, candidate, verdict.
void record_sample(Store& store, std::int64_t run_id, int round, int sample) {
  PromptRecord prompt;
  prompt.run_id = run_id;
  prompt.round = round;
  prompt.sample = sample;
  prompt.request = {{"sample", sample}};
  prompt = store.add_prompt(prompt);
  ResponseRecord response;
  response.prompt_id = prompt.id;
  response.raw = {{"id", prompt.custom_id}};
  response.content = prompt.custom_id;
  response.prompt_tokens = 3;
  response.completion_tokens = 5;
  if (!store.record_response(response)) throw std::runtime_error("response refused");
  CandidateRecord candidate;
  candidate.run_id = run_id;
  candidate.prompt_id = prompt.id;
  candidate.source = "# " + prompt.custom_id;
  VerdictRecord verdict;
  verdict.candidate_id = store.add_candidate(candidate);
  verdict.status = "ok";
  verdict.speedup = 1.0 + sample;
  verdict.verdict = {{"status", "ok"}};
  store.record_verdict(verdict);
}

TEST_F(StoreThreads, ConcurrentRecordingFromManyThreads) {
  const auto run_id = new_run();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int round = 0; round < kThreads; ++round) {
    threads.emplace_back([&, round] {
      try {
        for (int sample = 0; sample < kRecordsPerThread; ++sample) {
          record_sample(store(), run_id, round, sample);
          store().counts(run_id);  // readers interleave with the writers
          store().pool(run_id);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  ASSERT_EQ(failures, 0);
  const auto counts = store().counts(run_id);
  constexpr int kTotal = kThreads * kRecordsPerThread;
  EXPECT_EQ(counts.prompts, kTotal);
  EXPECT_EQ(counts.answered, kTotal);
  EXPECT_EQ(counts.candidates, kTotal);
  EXPECT_EQ(counts.evaluations, kTotal);
  EXPECT_EQ(counts.prompt_tokens, 3 * kTotal);
  EXPECT_EQ(counts.completion_tokens, 5 * kTotal);
  std::set<std::string> custom_ids;
  for (const auto& prompt : store().prompts(run_id)) {
    custom_ids.insert(prompt.custom_id);
    ASSERT_TRUE(store().response(prompt.id));
    EXPECT_EQ(store().response(prompt.id)->content, prompt.custom_id);
  }
  EXPECT_EQ(custom_ids.size(), static_cast<std::size_t>(kTotal));
  EXPECT_EQ(store().pool(run_id).size(), static_cast<std::size_t>(kTotal));
  EXPECT_EQ(query_text(database_, "PRAGMA integrity_check"), "ok");
}

TEST_F(StoreThreads, RacingResponsesToOnePromptRecordExactlyOne) {
  const auto run_id = new_run();
  const auto prompt = new_prompt(run_id, 0, 0);
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      if (store().record_response(response_to(prompt.id, i, i, "answer " + std::to_string(i)))) {
        ++accepted;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted, 1);
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM responses"), "1");
  // The tokens counted are those of the response that was kept.
  const auto kept = store().response(prompt.id);
  ASSERT_TRUE(kept);
  EXPECT_EQ(store().counts(run_id).prompt_tokens, kept->prompt_tokens);
}

TEST_F(StoreThreads, SeparateConnectionsWriteTheSameFile) {
  const auto run_id = new_run();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int round = 0; round < 4; ++round) {
    threads.emplace_back([&, round] {
      try {
        Store own(database_);  // another connection: waits on the file lock, not our mutex
        for (int sample = 0; sample < kRecordsPerThread; ++sample) {
          record_sample(own, run_id, round, sample);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(store().counts(run_id).answered, 4 * kRecordsPerThread);
}

TEST_F(StoreThreads, SimultaneousFirstOpensCreateTheSchemaOnce) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      try {
        Store own(database_);
        own.upsert_task("/tasks/t.py", "source");
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(query_text(database_, "PRAGMA user_version"), "3");
  EXPECT_EQ(query_text(database_, "SELECT count(*) FROM tasks"), "1");
}

}  // namespace
}  // namespace cudal1::store::testing
