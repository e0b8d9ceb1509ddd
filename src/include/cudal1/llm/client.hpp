// LLM back ends: an OpenAI-compatible HTTP server (vLLM, SGLang, llama-server, Ollama, hosted
// APIs) or a local command; both behind one thread-safe interface.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "cudal1/llm/chat.hpp"

namespace cudal1::llm {

struct ClientOptions {
  double request_timeout_s = 600;  // one HTTP request (or one command run), start to end
  double connect_timeout_s = 30;
  int max_retries = 6;             // retries after the first attempt, for retryable failures
  double backoff_initial_s = 1.0;  // first retry delay; doubles each retry, with jitter
  double backoff_max_s = 60.0;     // cap of one delay (Retry-After is honoured up to 10 min)
  int concurrency = 8;             // requests in flight at once through one client
  std::size_t max_response_bytes = 16u << 20;  // a longer reply is an error, not an OOM
  std::string api_key;                         // sent as "Authorization: Bearer ..." when not empty
};

// When to retry and how long to wait; a separate class so it can be tested without a server.
class RetryPolicy {
 public:
  explicit RetryPolicy(const ClientOptions& options, unsigned seed = 0);
  // Whether a failure with this HTTP status (0: connection failure or time-out) may be retried.
  static bool retryable(int http_status);
  // Seconds to wait before retry number `retry` (1-based): exponential with full jitter,
  // capped; a server's Retry-After (seconds) takes precedence when given.
  double delay_s(int retry, std::optional<double> retry_after_s);

 private:
  double initial_, cap_;
  unsigned state_;
};

class LlmClient {
 public:
  virtual ~LlmClient() = default;
  // Blocks until the reply arrives; thread-safe; at most `concurrency` calls proceed at once,
  // others wait. Throws LlmError.
  virtual ChatResponse complete(const ChatRequest& request) = 0;
  // For logs and the store: "http://host:8000/v1" or "cmd:...".
  virtual std::string describe() const = 0;
};

// `spec` is a base URL ("http://localhost:8000/v1"; requests go to {spec}/chat/completions) or
// "cmd:COMMAND" (the prompt on the command's stdin, the reply read from its stdout). Throws
// std::invalid_argument for anything else. The API key defaults to $CUDAL1_API_KEY.
std::unique_ptr<LlmClient> make_client(const std::string& spec, ClientOptions options = {});

}  // namespace cudal1::llm
