// A writer killed with SIGKILL at an arbitrary moment: what it reported committed is all there,
// and nothing is half-recorded.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cudal1/store/store.hpp"
#include "store_fixture.hpp"

namespace cudal1::store::testing {
namespace {

// Enough prompts that the writer is never done before it is killed.
constexpr int kPrompts = 2000;
// Commits the parent waits for before each kill; small, so a test lasts seconds, but more than
// one, so the kill lands well inside the loop.
constexpr int kReportsBeforeKill = 40;
constexpr int kKills = 12;
using Clock = std::chrono::steady_clock;

// Large enough that a commit writes several WAL pages, so a kill can land in the middle of one.
std::string content_for(std::int64_t prompt_id) {
  return "response to prompt " + std::to_string(prompt_id) + ": " +
         std::string(6000 + static_cast<std::size_t>(prompt_id % 7) * 1000, 'x');
}

bool read_id(int fd, std::int64_t& id) {
  char* bytes = reinterpret_cast<char*>(&id);
  std::size_t got = 0;
  while (got < sizeof id) {
    const ssize_t n = ::read(fd, bytes + got, sizeof id - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  return true;
}

// The child: records responses as fast as it can and reports each id once its commit returned.
[[noreturn]] void write_responses(const std::filesystem::path& database,
                                  const std::vector<std::int64_t>& prompt_ids, int report_fd) {
  try {
    Store store(database);
    for (const auto prompt_id : prompt_ids) {
      ResponseRecord response;
      response.prompt_id = prompt_id;
      response.content = content_for(prompt_id);
      response.raw = {{"content", response.content}};
      response.prompt_tokens = 1;
      response.completion_tokens = prompt_id;
      if (store.record_response(response) && ::write(report_fd, &prompt_id, sizeof prompt_id) < 0) {
        ::_exit(3);
      }
    }
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);  // ran out of prompts: the parent reports that the kill came too late
}

TEST(StoreCrash, KilledWriterLosesNothingItReportedCommitted) {
  const auto directory = scratch_directory();
  const auto database = directory / "cudal1.db";
  std::vector<std::int64_t> prompt_ids;
  std::int64_t run_id = 0;
  {
    // Closed before forking: an SQLite connection must not be carried into a child process.
    Store store(database);
    const auto task = store.upsert_task("/tasks/t.py", "source");
    RunRecord run;
    run.task_id = task.id;
    run_id = store.create_run(run);
    for (int sample = 0; sample < kPrompts; ++sample) {
      PromptRecord prompt;
      prompt.run_id = run_id;
      prompt.sample = sample;
      prompt_ids.push_back(store.add_prompt(prompt).id);
    }
  }

  std::set<std::int64_t> reported;
  std::mt19937_64 random(std::random_device{}());
  for (int kill = 0; kill < kKills; ++kill) {
    int pipe_fds[2];
    ASSERT_EQ(::pipe(pipe_fds), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(pipe_fds[0]);
      write_responses(database, prompt_ids, pipe_fds[1]);
    }
    ::close(pipe_fds[1]);
    std::int64_t id = 0;
    auto first_report = Clock::now();
    for (int got = 0; got < kReportsBeforeKill && read_id(pipe_fds[0], id); ++got) {
      if (got == 0) first_report = Clock::now();
      reported.insert(id);
    }
    // The kill lands at a random point of the next one or two commits: right after a report it
    // would always hit the same early step of a transaction.
    const auto per_commit = (Clock::now() - first_report) / (kReportsBeforeKill - 1);
    std::uniform_int_distribution<std::int64_t> delay(0, 2 * per_commit.count());
    std::this_thread::sleep_for(Clock::duration(delay(random)));
    ::kill(child, SIGKILL);
    // Reports already in the pipe were sent after their commits returned: they count too.
    while (read_id(pipe_fds[0], id)) reported.insert(id);
    ::close(pipe_fds[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer was not killed in its loop (exit status " << status << ")";
  }
  ASSERT_GE(reported.size(), static_cast<std::size_t>(kKills * kReportsBeforeKill));

  // Checked through a plain connection first, so the store's own open does not hide anything.
  EXPECT_EQ(query_text(database, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(query_text(database, "SELECT count(*) FROM pragma_foreign_key_check"), "0");
  EXPECT_EQ(query_text(database,
                       "SELECT count(*) FROM prompts p WHERE p.state = 'answered' AND "
                       "(SELECT count(*) FROM responses s WHERE s.prompt_id = p.id) <> 1"),
            "0")
      << "an answered prompt without exactly one response";
  EXPECT_EQ(query_text(database,
                       "SELECT count(*) FROM responses s JOIN prompts p ON p.id = s.prompt_id "
                       "WHERE p.state <> 'answered'"),
            "0")
      << "a response whose prompt is not marked answered";

  Store store(database);
  for (const auto prompt_id : reported) {
    const auto response = store.response(prompt_id);
    ASSERT_TRUE(response) << "prompt " << prompt_id << " was reported committed";
    EXPECT_EQ(response->content, content_for(prompt_id));
    EXPECT_EQ(response->raw.at("content"), content_for(prompt_id));
  }
  const auto counts = store.counts(run_id);
  EXPECT_GE(counts.answered, static_cast<std::int64_t>(reported.size()));
  EXPECT_EQ(counts.answered + counts.pending, kPrompts);
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace cudal1::store::testing
