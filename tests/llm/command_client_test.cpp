// The cmd: back end with real shell commands.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cudal1/common/paths.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/llm/client.hpp"

namespace cudal1::llm {
namespace {

using Clock = std::chrono::steady_clock;

ChatRequest request() {
  ChatRequest out;
  out.model = "local-coder";
  // The system message comes second here: the prompt text must still put it first.
  out.messages = {{"user", "Make it faster."}, {"system", "You write CUDA."}};
  return out;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

LlmError failure_of(const std::string& spec, ClientOptions options = {}) {
  try {
    const ChatResponse response = make_client(spec, options)->complete(request());
    ADD_FAILURE() << "expected an error, got a reply: " << response.content;
  } catch (const LlmError& error) {
    return error;
  }
  return LlmError(LlmError::Kind::kTransient, "no error");
}

bool mentions(const LlmError& error, const std::string& part) {
  return std::string(error.what()).find(part) != std::string::npos;
}

// Running: neither gone nor a zombie waiting for whoever inherited it to reap it.
bool process_exists(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

TEST(CommandClient, CatEchoesThePromptSystemFirst) {
  const ChatResponse response = make_client("cmd:cat")->complete(request());
  EXPECT_EQ(response.content, "You write CUDA.\n\nMake it faster.");
  EXPECT_EQ(response.finish_reason, "stop");
  EXPECT_EQ(response.usage.prompt_tokens, 0);
  EXPECT_EQ(response.usage.completion_tokens, 0);
  EXPECT_EQ(response.attempts, 1);
}

TEST(CommandClient, TheCommandSeesTheModelName) {
  EXPECT_EQ(make_client("cmd:printf '%s' \"$CUDAL1_MODEL\"")->complete(request()).content,
            "local-coder");
}

TEST(CommandClient, AFailingCommandReportsItsExitCodeAndStderr) {
  const LlmError error = failure_of("cmd:echo 'model file missing' >&2; exit 3");
  EXPECT_EQ(error.kind(), LlmError::Kind::kCommand);
  EXPECT_TRUE(mentions(error, "exit code 3")) << error.what();
  EXPECT_TRUE(mentions(error, "model file missing")) << error.what();
  EXPECT_TRUE(mentions(error, "exit 3")) << "the command itself is named: " << error.what();
}

TEST(CommandClient, ASlowCommandTimesOutAndItsGroupIsKilled) {
  const auto dir = make_private_directory(std::filesystem::temp_directory_path(), "cudal1-cmd-");
  const auto pid_file = dir / "sleeper.pid";
  ClientOptions options;
  options.request_timeout_s = 0.5;
  const auto start = Clock::now();
  const LlmError error =
      failure_of("cmd:sleep 30 & echo $! > " + pid_file.string() + "; wait", options);
  // Far under the command's 30 s, far over the 0.5 s timeout on a loaded machine.
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(error.kind(), LlmError::Kind::kCommand);
  EXPECT_TRUE(mentions(error, "timed out")) << error.what();
  ASSERT_TRUE(std::filesystem::exists(pid_file));
  const pid_t sleeper = std::stoi(read_file(pid_file));
  for (int i = 0; i < 100 && process_exists(sleeper); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(process_exists(sleeper)) << "the command's child outlived the time-out";
  std::filesystem::remove_all(dir);
}

TEST(CommandClient, ACommandPrintingNothingFails) {
  const LlmError silent = failure_of("cmd:true");
  EXPECT_EQ(silent.kind(), LlmError::Kind::kCommand);
  EXPECT_TRUE(mentions(silent, "printed nothing")) << silent.what();
  const LlmError blank = failure_of("cmd:printf '\\n  \\n'");
  EXPECT_EQ(blank.kind(), LlmError::Kind::kCommand);
}

TEST(CommandClient, NoMoreThanConcurrencyCommandsRunAtOnce) {
  ClientOptions options;
  options.concurrency = 1;
  const auto client = make_client("cmd:sleep 0.3; cat", options);
  std::vector<std::thread> callers;
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) callers.emplace_back([&client] { client->complete(request()); });
  for (auto& caller : callers) caller.join();
  EXPECT_GE(seconds_since(start), 0.9) << "three 0.3 s commands, one at a time";
}

}  // namespace
}  // namespace cudal1::llm
