#include "cudal1/llm/batch.hpp"

#include <gtest/gtest.h>

namespace cudal1::llm {
namespace {

using nlohmann::json;

json result_line(const std::string& text) {
  return json::parse(text);
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Batch, RequestLineFollowsTheBatchApi) {
  ChatRequest request;
  request.model = "m";
  request.messages = {{"user", "speed this up"}};
  request.max_tokens = 512;
  const json line = batch_request_line("task-7/round-2/sample-3", request);
  EXPECT_EQ(line["custom_id"], "task-7/round-2/sample-3");
  EXPECT_EQ(line["method"], "POST");
  EXPECT_EQ(line["url"], "/v1/chat/completions");
  EXPECT_EQ(line["body"], request.to_openai_body());
  EXPECT_EQ(line.size(), 4u);
  // A batch runner reads the body as an ordinary request.
  EXPECT_EQ(ChatRequest::from_openai_body(line["body"]).messages.at(0).content, "speed this up");
}

TEST(Batch, ReadsASuccessfulLine) {
  const BatchResult result = parse_batch_result_line(result_line(R"({
    "id": "batch_req_1", "custom_id": "c1", "error": null,
    "response": {"status_code": 200, "request_id": "r1", "body": {
      "choices": [{"index": 0, "message": {"role": "assistant", "content": "new kernel"},
                   "finish_reason": "length"}],
      "usage": {"prompt_tokens": 10, "completion_tokens": 20}}}})"));
  EXPECT_EQ(result.custom_id, "c1");
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.response.content, "new kernel");
  EXPECT_EQ(result.response.finish_reason, "length");
  EXPECT_EQ(result.response.usage.completion_tokens, 20);
  EXPECT_TRUE(result.error.empty());
}

TEST(Batch, AnErrorObjectFailsTheLine) {
  const BatchResult result = parse_batch_result_line(result_line(R"({
    "id": "b", "custom_id": "c2", "response": null,
    "error": {"code": "batch_expired", "message": "This request could not be executed in time."}})"));
  EXPECT_EQ(result.custom_id, "c2");
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(mentions(result.error, "could not be executed")) << result.error;
  EXPECT_TRUE(mentions(result.error, "batch_expired")) << result.error;
}

TEST(Batch, ANon200StatusFailsTheLineWithTheServersMessage) {
  const BatchResult result = parse_batch_result_line(result_line(R"({
    "id": "b", "custom_id": "c3", "error": null,
    "response": {"status_code": 400, "body": {"error": {"message": "prompt too long"}}}})"));
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(mentions(result.error, "400")) << result.error;
  EXPECT_TRUE(mentions(result.error, "prompt too long")) << result.error;
}

TEST(Batch, AMalformedOrEmptyBodyFailsTheLine) {
  const BatchResult no_choices = parse_batch_result_line(result_line(R"({
    "custom_id": "c4", "response": {"status_code": 200, "body": {"object": "list"}}})"));
  EXPECT_FALSE(no_choices.ok);
  EXPECT_TRUE(mentions(no_choices.error, "choices")) << no_choices.error;

  const BatchResult empty = parse_batch_result_line(result_line(R"({
    "custom_id": "c5", "response": {"status_code": 200, "body": {"choices": [
      {"message": {"role": "assistant", "content": ""}}]}}})"));
  EXPECT_FALSE(empty.ok);
  EXPECT_TRUE(mentions(empty.error, "no text")) << empty.error;

  const BatchResult no_response = parse_batch_result_line(result_line(R"({"custom_id": "c6"})"));
  EXPECT_FALSE(no_response.ok);
  EXPECT_FALSE(no_response.error.empty());

  const BatchResult no_status =
      parse_batch_result_line(result_line(R"({"custom_id": "c7", "response": {"body": {}}})"));
  EXPECT_FALSE(no_status.ok);
  EXPECT_TRUE(mentions(no_status.error, "status_code")) << no_status.error;
}

TEST(Batch, ALineWithoutCustomIdThrows) {
  EXPECT_THROW(parse_batch_result_line(result_line(R"({"response": {"status_code": 200}})")),
               std::runtime_error);
  EXPECT_THROW(parse_batch_result_line(result_line(R"({"custom_id": 5})")), std::runtime_error);
  EXPECT_THROW(parse_batch_result_line(result_line("[]")), std::runtime_error);
}

}  // namespace
}  // namespace cudal1::llm
