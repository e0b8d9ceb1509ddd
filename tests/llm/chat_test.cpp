#include "cudal1/llm/chat.hpp"

#include <gtest/gtest.h>

namespace cudal1::llm {
namespace {

using nlohmann::json;

json completion_with(const json& message, const json& extra = json::object()) {
  const json choice = {{"index", 0}, {"message", message}, {"finish_reason", "stop"}};
  json body = {
      {"id", "chatcmpl-1"}, {"object", "chat.completion"}, {"choices", json::array({choice})}};
  body.update(extra);
  return body;
}

LlmError::Kind failure_kind(const json& body) {
  try {
    parse_chat_completion(body);
  } catch (const LlmError& error) {
    return error.kind();
  }
  ADD_FAILURE() << "accepted: " << body.dump();
  return LlmError::Kind::kTransient;
}

ChatRequest sample_request() {
  ChatRequest request;
  request.model = "qwen-coder";
  request.messages = {{"system", "You optimise CUDA."}, {"user", "Make this faster."}};
  request.temperature = 0.25;
  request.max_tokens = 4096;
  return request;
}

TEST(ChatRequest, WritesTheOpenAiBody) {
  const json body = sample_request().to_openai_body();
  EXPECT_EQ(body["model"], "qwen-coder");
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0], json({{"role", "system"}, {"content", "You optimise CUDA."}}));
  EXPECT_EQ(body["messages"][1]["content"], "Make this faster.");
  EXPECT_DOUBLE_EQ(body["temperature"].get<double>(), 0.25);
  EXPECT_EQ(body["max_tokens"], 4096);
  EXPECT_FALSE(body.contains("n")) << "llama-server rejects n > 1; one completion per request";

  ChatRequest unlimited = sample_request();
  unlimited.max_tokens.reset();
  EXPECT_FALSE(unlimited.to_openai_body().contains("max_tokens"));
}

TEST(ChatRequest, ReadsItsOwnBodyBack) {
  const ChatRequest back = ChatRequest::from_openai_body(sample_request().to_openai_body());
  EXPECT_EQ(back.model, "qwen-coder");
  ASSERT_EQ(back.messages.size(), 2u);
  EXPECT_EQ(back.messages[0].role, "system");
  EXPECT_EQ(back.messages[1].content, "Make this faster.");
  EXPECT_DOUBLE_EQ(back.temperature, 0.25);
  EXPECT_EQ(back.max_tokens, 4096);
}

TEST(ChatRequest, ReadsContentPartsAndRejectsNonsense) {
  const json parts = json::parse(R"({"model": "m", "messages": [{"role": "user", "content":
      [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(ChatRequest::from_openai_body(parts).messages.at(0).content, "ab");
  EXPECT_FALSE(ChatRequest::from_openai_body(parts).max_tokens);
  EXPECT_THROW(ChatRequest::from_openai_body(json::array()), std::invalid_argument);
  EXPECT_THROW(ChatRequest::from_openai_body({{"model", "m"}}), std::invalid_argument);
  EXPECT_THROW(ChatRequest::from_openai_body(json::parse(R"({"messages": [{"role": "user"}]})")),
               std::invalid_argument);
  EXPECT_THROW(ChatRequest::from_openai_body({{"messages", json::array()}, {"temperature", "hot"}}),
               std::invalid_argument);
}

TEST(ChatCompletion, ReadsContentFinishReasonAndUsage) {
  const json body =
      completion_with({{"role", "assistant"}, {"content", "def forward(x): ..."}},
                      {{"usage", {{"prompt_tokens", 120}, {"completion_tokens", 34}}}});
  const ChatResponse response = parse_chat_completion(body);
  EXPECT_EQ(response.content, "def forward(x): ...");
  EXPECT_EQ(response.finish_reason, "stop");
  EXPECT_EQ(response.usage.prompt_tokens, 120);
  EXPECT_EQ(response.usage.completion_tokens, 34);
  EXPECT_EQ(response.raw, body);
  EXPECT_EQ(response.attempts, 1);
}

TEST(ChatCompletion, MissingUsageAndFinishReasonAreZeroAndEmpty) {
  json body = completion_with({{"role", "assistant"}, {"content", "text"}});
  body["choices"][0].erase("finish_reason");
  const ChatResponse response = parse_chat_completion(body);
  EXPECT_EQ(response.finish_reason, "");
  EXPECT_EQ(response.usage.prompt_tokens, 0);
  EXPECT_EQ(response.usage.completion_tokens, 0);
  body["usage"] = nullptr;
  EXPECT_EQ(parse_chat_completion(body).usage.completion_tokens, 0);
}

TEST(ChatCompletion, JoinsTextParts) {
  const json parts = json::parse(R"([{"type": "text", "text": "first "},
      {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "second"}])");
  EXPECT_EQ(parse_chat_completion(completion_with({{"content", parts}})).content, "first second");
}

TEST(ChatCompletion, RejectsBodiesThatAreNotCompletions) {
  using Kind = LlmError::Kind;
  EXPECT_EQ(failure_kind(json::array()), Kind::kMalformed);
  EXPECT_EQ(failure_kind("just text"), Kind::kMalformed);
  EXPECT_EQ(failure_kind(json::object()), Kind::kMalformed);
  EXPECT_EQ(failure_kind({{"choices", json::array()}}), Kind::kMalformed);
  EXPECT_EQ(failure_kind(json::parse(R"({"choices": [1]})")), Kind::kMalformed);
  EXPECT_EQ(failure_kind(json::parse(R"({"choices": [{"index": 0}]})")), Kind::kMalformed);
  EXPECT_EQ(failure_kind(completion_with({{"role", "assistant"}})), Kind::kMalformed);
  EXPECT_EQ(failure_kind(completion_with({{"content", 42}})), Kind::kMalformed);
  EXPECT_EQ(failure_kind(completion_with(json::parse(R"({"content": {"text": "x"}})"))),
            Kind::kMalformed);
  EXPECT_EQ(failure_kind(completion_with(json::parse(R"({"content": ["bare string part"]})"))),
            Kind::kMalformed);
}

TEST(ChatCompletion, AnErrorInsteadOfChoicesKeepsTheServersMessage) {
  try {
    parse_chat_completion({{"error", {{"message", "model overloaded"}}}});
    FAIL() << "accepted an error body";
  } catch (const LlmError& error) {
    EXPECT_EQ(error.kind(), LlmError::Kind::kMalformed);
    EXPECT_NE(std::string(error.what()).find("model overloaded"), std::string::npos)
        << error.what();
  }
}

TEST(ChatCompletion, NoTextIsEmpty) {
  using Kind = LlmError::Kind;
  EXPECT_EQ(failure_kind(completion_with({{"content", ""}})), Kind::kEmpty);
  EXPECT_EQ(failure_kind(completion_with({{"content", " \n\t "}})), Kind::kEmpty);
  EXPECT_EQ(failure_kind(completion_with({{"content", nullptr}})), Kind::kEmpty);
  EXPECT_EQ(failure_kind(completion_with({{"content", json::array()}})), Kind::kEmpty);
}

TEST(ChatCompletion, EmptyBecauseOfTheLengthLimitSaysSo) {
  json body = completion_with({{"content", ""}});
  body["choices"][0]["finish_reason"] = "length";
  try {
    parse_chat_completion(body);
    FAIL() << "accepted an empty reply";
  } catch (const LlmError& error) {
    EXPECT_EQ(error.kind(), LlmError::Kind::kEmpty);
    EXPECT_NE(std::string(error.what()).find("max_tokens"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace cudal1::llm
