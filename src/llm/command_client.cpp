#include "command_client.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/paths.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/common/text_file.hpp"

namespace cudal1::llm {
namespace {

namespace fs = std::filesystem;

// The end of stderr is where a failing program says why; more would bury the message.
constexpr std::size_t kStderrTail = 2000;

// No request time-out still needs a number for wait_or_kill: a year is "never" here.
constexpr double kUnlimited_s = 365.0 * 24 * 3600;

std::string without_surrounding_space(std::string text) {
  const auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  text.erase(std::find_if_not(text.rbegin(), text.rend(), space).base(), text.end());
  text.erase(text.begin(), std::find_if_not(text.begin(), text.end(), space));
  return text;
}

// Removes the request's scratch directory however the request ends.
class ScratchDirectory {
 public:
  ScratchDirectory()
      : path_(make_private_directory(fs::temp_directory_path(), "cudal1-llm-cmd-")) {}
  ~ScratchDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_prompt(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write the prompt to " + path.string());
}

}  // namespace

CommandChatClient::CommandChatClient(std::string command, ClientOptions options)
    : command_(std::move(command)), options_(std::move(options)), slots_(options_.concurrency) {}

std::string CommandChatClient::prompt_text(const ChatRequest& request) {
  std::vector<const ChatMessage*> ordered;
  for (const ChatMessage& message : request.messages) {
    if (message.role == "system") ordered.push_back(&message);
  }
  for (const ChatMessage& message : request.messages) {
    if (message.role != "system") ordered.push_back(&message);
  }
  std::string text;
  for (const ChatMessage* message : ordered) {
    if (!text.empty()) text += "\n\n";
    text += message->content;
  }
  return text;
}

ChatResponse CommandChatClient::complete(const ChatRequest& request) {
  RequestSlots::Held slot(slots_);
  const ScratchDirectory scratch;
  const fs::path prompt_file = scratch.path() / "prompt.txt";
  const fs::path reply_file = scratch.path() / "reply.txt";
  const fs::path stderr_file = scratch.path() / "stderr.txt";
  write_prompt(prompt_file, prompt_text(request));

  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", command_};
  spec.stdin_file = prompt_file;
  spec.stdout_file = reply_file;
  spec.log_file = stderr_file;
  spec.environment["CUDAL1_MODEL"] = request.model;
  spec.environment["CUDAL1_TEMPERATURE"] = fmt::format("{}", request.temperature);
  if (request.max_tokens)
    spec.environment["CUDAL1_MAX_TOKENS"] = std::to_string(*request.max_tokens);

  std::unique_ptr<ChildProcess> child;
  try {
    child = ChildProcess::spawn(spec);
  } catch (const std::system_error& error) {
    throw LlmError(LlmError::Kind::kCommand,
                   fmt::format("cannot start '{}': {}", command_, error.what()));
  }
  const double timeout_s =
      options_.request_timeout_s > 0 ? options_.request_timeout_s : kUnlimited_s;
  const std::optional<ExitStatus> status = child->wait_or_kill(timeout_s);
  const std::string stderr_tail =
      without_surrounding_space(trim_log_file(stderr_file, 0, kStderrTail));
  const std::string stderr_note = stderr_tail.empty() ? "(no stderr)" : "stderr: " + stderr_tail;

  if (!status) {
    throw LlmError(LlmError::Kind::kCommand,
                   fmt::format("'{}' timed out after {} s (request_timeout_s) and was killed; {}",
                               command_, timeout_s, stderr_note));
  }
  if (status->signaled || status->code != 0) {
    throw LlmError(LlmError::Kind::kCommand,
                   fmt::format("'{}' failed ({}); {}", command_, status->describe(), stderr_note));
  }
  std::error_code size_error;
  const auto reply_bytes = fs::file_size(reply_file, size_error);
  if (!size_error && reply_bytes > options_.max_response_bytes) {
    throw LlmError(LlmError::Kind::kMalformed,
                   fmt::format("'{}': reply larger than {} bytes (max_response_bytes)", command_,
                               options_.max_response_bytes));
  }
  // Replies end up in JSON (the store, batch files), which must be valid UTF-8.
  std::string content = size_error ? std::string() : sanitize_utf8(read_file(reply_file));
  if (without_surrounding_space(content).empty()) {
    throw LlmError(LlmError::Kind::kCommand,
                   fmt::format("'{}' printed nothing on stdout; {}", command_, stderr_note));
  }

  ChatResponse response;
  response.raw = {{"command", command_}, {"content", content}};
  response.content = std::move(content);
  response.finish_reason = "stop";
  return response;
}

}  // namespace cudal1::llm
