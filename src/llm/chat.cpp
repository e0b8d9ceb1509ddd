#include "cudal1/llm/chat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace cudal1::llm {
namespace {

using nlohmann::json;

// Servers differ in how they spell a message: a string, or (newer OpenAI clients, vLLM
// multimodal) a list of typed parts of which only the text parts carry the reply.
std::optional<std::string> message_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const json& part : content) {
    if (!part.is_object()) return std::nullopt;
    const auto type = part.find("type");
    const auto part_text = part.find("text");
    if (type != part.end() && *type == "text" && part_text != part.end() &&
        part_text->is_string()) {
      text += part_text->get<std::string>();
    }
  }
  return text;
}

bool blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](unsigned char c) { return std::isspace(c) != 0; });
}

long long token_count(const json& usage, const char* field) {
  const auto value = usage.find(field);
  if (value == usage.end() || !value->is_number()) return 0;
  return value->get<long long>();
}

// The first characters of a body, for messages that must show what arrived instead.
std::string excerpt(const json& body) {
  constexpr std::size_t kShown = 200;  // enough to recognise an error page or a wrong API
  std::string text = body.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kShown) text = text.substr(0, kShown) + "...";
  return text;
}

[[noreturn]] void malformed(const std::string& what, const json& body) {
  throw LlmError(LlmError::Kind::kMalformed,
                 fmt::format("not a chat completion: {} (body: {})", what, excerpt(body)));
}

// Some servers answer 200 with {"error": ...} instead of a completion; their text beats ours.
std::string embedded_error(const json& body) {
  const auto error = body.find("error");
  if (error == body.end() || error->is_null()) return {};
  if (error->is_string()) return error->get<std::string>();
  if (error->is_object()) {
    const auto message = error->find("message");
    if (message != error->end() && message->is_string()) return message->get<std::string>();
  }
  return error->dump();
}

}  // namespace

json ChatRequest::to_openai_body() const {
  json body;
  body["model"] = model;
  body["messages"] = json::array();
  for (const ChatMessage& message : messages) {
    body["messages"].push_back({{"role", message.role}, {"content", message.content}});
  }
  body["temperature"] = temperature;
  if (max_tokens) body["max_tokens"] = *max_tokens;
  return body;
}

ChatRequest ChatRequest::from_openai_body(const json& body) {
  if (!body.is_object()) {
    throw std::invalid_argument("chat request body: expected a JSON object, got " +
                                std::string(body.type_name()));
  }
  ChatRequest request;
  if (const auto model = body.find("model"); model != body.end()) {
    if (!model->is_string())
      throw std::invalid_argument("chat request body: \"model\" is not a string");
    request.model = model->get<std::string>();
  }
  const auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) {
    throw std::invalid_argument("chat request body: \"messages\" is missing or not a list");
  }
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    const auto role = message.is_object() ? message.find("role") : message.end();
    const auto content = message.is_object() ? message.find("content") : message.end();
    std::optional<std::string> text;
    if (content != message.end()) text = message_text(*content);
    if (role == message.end() || !role->is_string() || !text) {
      throw std::invalid_argument(fmt::format(
          "chat request body: messages[{}] needs a string \"role\" and a text \"content\"", i));
    }
    request.messages.push_back({role->get<std::string>(), *text});
  }
  if (const auto temperature = body.find("temperature");
      temperature != body.end() && !temperature->is_null()) {
    if (!temperature->is_number()) {
      throw std::invalid_argument("chat request body: \"temperature\" is not a number");
    }
    request.temperature = temperature->get<double>();
  }
  if (const auto max_tokens = body.find("max_tokens");
      max_tokens != body.end() && !max_tokens->is_null()) {
    if (!max_tokens->is_number_integer()) {
      throw std::invalid_argument("chat request body: \"max_tokens\" is not an integer");
    }
    request.max_tokens = max_tokens->get<int>();
  }
  return request;
}

ChatResponse parse_chat_completion(const json& body) {
  if (!body.is_object()) malformed(fmt::format("a JSON {}, not an object", body.type_name()), body);
  const auto choices = body.find("choices");
  if (choices == body.end() || !choices->is_array() || choices->empty()) {
    const std::string error = embedded_error(body);
    if (!error.empty()) malformed("the server reported an error: " + error, body);
    malformed("no \"choices\"", body);
  }
  const json& choice = choices->front();
  const auto message = choice.is_object() ? choice.find("message") : choice.end();
  if (message == choice.end() || !message->is_object())
    malformed("choices[0] has no \"message\"", body);

  ChatResponse response;
  response.raw = body;
  if (const auto finish = choice.find("finish_reason");
      finish != choice.end() && finish->is_string()) {
    response.finish_reason = finish->get<std::string>();
  }
  if (const auto usage = body.find("usage"); usage != body.end() && usage->is_object()) {
    response.usage.prompt_tokens = token_count(*usage, "prompt_tokens");
    response.usage.completion_tokens = token_count(*usage, "completion_tokens");
  }

  const auto content = message->find("content");
  if (content == message->end()) malformed("choices[0].message has no \"content\"", body);
  // A null content is how OpenAI-style servers say "no text" (a refusal, a tool call, a
  // reasoning model that spent every token thinking): an empty reply, not a broken one.
  std::optional<std::string> text =
      content->is_null() ? std::optional<std::string>("") : message_text(*content);
  if (!text) malformed("choices[0].message.content is not text", body);
  if (blank(*text)) {
    const std::string reason =
        response.finish_reason.empty() ? "none given" : response.finish_reason;
    throw LlmError(LlmError::Kind::kEmpty,
                   fmt::format("the model returned no text (finish_reason: {}{})", reason,
                               response.finish_reason == "length"
                                   ? "; max_tokens may be too small for the answer"
                                   : ""));
  }
  response.content = std::move(*text);
  return response;
}

}  // namespace cudal1::llm
