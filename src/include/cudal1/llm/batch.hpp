// Offline generation through batch files in the OpenAI Batch API format, e.g. for vLLM's
// offline batch runner: requests out, completions back in.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/llm/chat.hpp"

namespace cudal1::llm {

// One request line: {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}.
nlohmann::json batch_request_line(const std::string& custom_id, const ChatRequest& request);

struct BatchResult {
  std::string custom_id;
  bool ok = false;
  ChatResponse response;  // when ok
  std::string error;      // when !ok: the line's error, a non-200 status, or a malformed body
};

// One output line: {"id", "custom_id", "response": {"status_code", "body"}, "error"}. Throws
// std::runtime_error only when the line has no custom_id (nothing to attach it to).
BatchResult parse_batch_result_line(const nlohmann::json& line);

}  // namespace cudal1::llm
