// Chat-completion requests and replies, the common currency of every LLM back end (an
// OpenAI-compatible server, a command, offline batch files).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace cudal1::llm {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  double temperature = 0.7;
  std::optional<int> max_tokens;

  // The body of POST {base}/chat/completions: {"model", "messages", "temperature", "max_tokens"?}.
  // One completion per request (no "n"): servers such as llama-server reject n > 1.
  nlohmann::json to_openai_body() const;
  static ChatRequest from_openai_body(const nlohmann::json& body);
};

struct TokenUsage {
  long long prompt_tokens = 0;
  long long completion_tokens = 0;
};

struct ChatResponse {
  std::string content;        // the assistant message's text
  std::string finish_reason;  // "stop", "length", ... ("" when the server gave none)
  TokenUsage usage;           // zeros when the server reports none
  nlohmann::json raw;         // the whole response body as received
  int attempts = 1;           // HTTP requests it took, retries included
};

class LlmError : public std::runtime_error {
 public:
  enum class Kind {
    kAuth,        // 401, 403: the key is missing or wrong; never retried
    kBadRequest,  // 400, 404, 422 (unknown model, bad URL, prompt too long); never retried
    kTransient,   // 408, 409, 429, 5xx, connection failures, time-outs, after the retries ran out
    kMalformed,   // a body that is not a chat completion (not JSON, no choices, ...)
    kEmpty,       // a well-formed completion with no text
    kCommand,     // a cmd: back end that failed (exit status, no output, time-out)
  };
  LlmError(Kind kind, const std::string& message, int http_status = 0)
      : std::runtime_error(message), kind_(kind), http_status_(http_status) {}
  Kind kind() const { return kind_; }
  int http_status() const { return http_status_; }  // 0 when no HTTP status was received

 private:
  Kind kind_;
  int http_status_;
};

// Reads an OpenAI chat-completion body; throws LlmError (kMalformed, kEmpty) when it is not one.
ChatResponse parse_chat_completion(const nlohmann::json& body);

}  // namespace cudal1::llm
