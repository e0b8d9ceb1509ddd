#include "cudal1/llm/batch.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace cudal1::llm {
namespace {

using nlohmann::json;

// The OpenAI Batch API's endpoint name for chat completions; vLLM's batch runner expects it too.
constexpr const char* kChatCompletionsUrl = "/v1/chat/completions";

std::string error_text(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (!error.is_object()) return error.dump();
  const auto message = error.find("message");
  const auto code = error.find("code");
  std::string text =
      message != error.end() && message->is_string() ? message->get<std::string>() : error.dump();
  if (code != error.end() && code->is_string()) text = code->get<std::string>() + ": " + text;
  return text;
}

}  // namespace

json batch_request_line(const std::string& custom_id, const ChatRequest& request) {
  return {{"custom_id", custom_id},
          {"method", "POST"},
          {"url", kChatCompletionsUrl},
          {"body", request.to_openai_body()}};
}

BatchResult parse_batch_result_line(const json& line) {
  const auto id = line.is_object() ? line.find("custom_id") : line.end();
  if (id == line.end() || !id->is_string()) {
    throw std::runtime_error("batch result line without a string \"custom_id\"");
  }
  BatchResult result;
  result.custom_id = id->get<std::string>();

  if (const auto error = line.find("error"); error != line.end() && !error->is_null()) {
    result.error = "batch error: " + error_text(*error);
    return result;
  }
  const auto response = line.find("response");
  if (response == line.end() || !response->is_object()) {
    result.error = "no \"response\" object";
    return result;
  }
  const auto status = response->find("status_code");
  if (status == response->end() || !status->is_number_integer()) {
    result.error = "response has no integer \"status_code\"";
    return result;
  }
  const auto body = response->find("body");
  if (*status != 200) {
    std::string detail;
    if (body != response->end() && body->is_object()) {
      if (const auto error = body->find("error"); error != body->end() && !error->is_null()) {
        detail = ": " + error_text(*error);
      }
    }
    result.error = fmt::format("status {}{}", status->get<int>(), detail);
    return result;
  }
  if (body == response->end()) {
    result.error = "response has no \"body\"";
    return result;
  }
  try {
    result.response = parse_chat_completion(*body);
    result.ok = true;
  } catch (const LlmError& error) {
    result.error = error.what();
  }
  return result;
}

}  // namespace cudal1::llm
