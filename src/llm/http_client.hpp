// The back end for OpenAI-compatible servers: vLLM, SGLang, llama-server, Ollama, hosted APIs.
#pragma once

#include <mutex>
#include <string>

#include "cudal1/llm/client.hpp"
#include "request_slots.hpp"

namespace cudal1::llm {

class HttpChatClient final : public LlmClient {
 public:
  // `base_url` as the user gave it ("http://localhost:8000/v1"); a trailing slash is dropped.
  HttpChatClient(std::string base_url, ClientOptions options);

  // One POST {base}/chat/completions per attempt; retryable failures are retried with backoff.
  ChatResponse complete(const ChatRequest& request) override;
  std::string describe() const override { return base_url_; }

 private:
  double next_delay_s(int retry, std::optional<double> retry_after_s);

  std::string base_url_;
  std::string endpoint_;
  ClientOptions options_;
  RequestSlots slots_;
  std::mutex policy_mutex_;  // the policy's jitter generator is shared by every thread
  RetryPolicy policy_;
};

}  // namespace cudal1::llm
