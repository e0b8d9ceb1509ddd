// The HTTP client against cudal1_test_llm_server: replies, retries, failures, limits.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

#include "cudal1/llm/client.hpp"
#include "scripted_server.hpp"

namespace cudal1::llm {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Retries that cost milliseconds, so failure paths stay quick.
ClientOptions quick() {
  ClientOptions options;
  options.request_timeout_s = 10;
  options.connect_timeout_s = 5;
  options.max_retries = 2;
  options.backoff_initial_s = 0.01;
  options.backoff_max_s = 0.05;
  return options;
}

ChatRequest request(const std::string& user_text = "Please optimise this kernel.") {
  ChatRequest out;
  out.model = "test-model";
  out.messages = {{"system", "You write fast CUDA."}, {"user", user_text}};
  out.temperature = 0.5;
  out.max_tokens = 256;
  return out;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The error complete() throws; a failed expectation when it returns instead.
LlmError failure_of(LlmClient& client, const ChatRequest& chat = request()) {
  try {
    const ChatResponse response = client.complete(chat);
    ADD_FAILURE() << "expected an error, got a reply: " << response.content;
  } catch (const LlmError& error) {
    return error;
  }
  return LlmError(LlmError::Kind::kCommand, "no error");
}

bool mentions(const LlmError& error, const std::string& part) {
  return std::string(error.what()).find(part) != std::string::npos;
}

// A port nothing listens on: bound once by us, then released.
int closed_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

class EnvironmentKey {
 public:
  explicit EnvironmentKey(const char* value) {
    if (const char* old = std::getenv("CUDAL1_API_KEY")) saved_ = old;
    if (value) {
      ::setenv("CUDAL1_API_KEY", value, 1);
    } else {
      ::unsetenv("CUDAL1_API_KEY");
    }
  }
  ~EnvironmentKey() {
    if (saved_) {
      ::setenv("CUDAL1_API_KEY", saved_->c_str(), 1);
    } else {
      ::unsetenv("CUDAL1_API_KEY");
    }
  }

 private:
  std::optional<std::string> saved_;
};

TEST(HttpClient, ReadsANormalReplyAndSendsTheRequestAndKey) {
  EnvironmentKey no_environment_key(nullptr);
  ScriptedServer server(
      json::parse(R"({"replies": [{"content": "here is a faster kernel", "match": "optimise"}]})"));
  ClientOptions options = quick();
  options.api_key = "secret-key";
  const auto client = make_client(server.base_url(), options);
  const ChatRequest chat = request();
  const ChatResponse response = client->complete(chat);

  EXPECT_EQ(response.content, "here is a faster kernel");
  EXPECT_EQ(response.finish_reason, "stop");
  const long long prompt_characters = 20 + 28;  // both messages, as the server counts them
  EXPECT_EQ(response.usage.prompt_tokens, prompt_characters / 4);
  EXPECT_EQ(response.usage.completion_tokens, 23 / 4);
  EXPECT_EQ(response.raw["model"], "test-model");
  EXPECT_EQ(response.attempts, 1);

  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["method"], "POST");
  EXPECT_EQ(seen[0]["path"], "/v1/chat/completions");
  EXPECT_EQ(seen[0]["authorization"], "Bearer secret-key");
  EXPECT_EQ(seen[0]["body"], chat.to_openai_body());
}

TEST(HttpClient, SendsNoAuthorizationWithoutAKeyAndAcceptsATrailingSlash) {
  EnvironmentKey no_environment_key(nullptr);
  ScriptedServer server(json::parse(R"({"default": {"content": "ok"}})"));
  const auto client = make_client(server.base_url() + "/", quick());
  EXPECT_EQ(client->complete(request()).content, "ok");
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0]["authorization"].is_null()) << seen[0].dump();
  EXPECT_EQ(seen[0]["path"], "/v1/chat/completions");
}

TEST(HttpClient, TakesTheKeyFromTheEnvironment) {
  EnvironmentKey key("key-from-environment");
  ScriptedServer server(json::parse(R"({"default": {"content": "ok"}})"));
  make_client(server.base_url(), quick())->complete(request());
  const auto seen = server.requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0]["authorization"], "Bearer key-from-environment");
}

TEST(HttpClient, ARateLimitIsRetriedAfterTheServersDelay) {
  ScriptedServer server(json::parse(R"({"replies": [
      {"status": 429, "headers": {"Retry-After": "1"}, "error": "slow down"},
      {"content": "finally"}]})"));
  const auto start = Clock::now();
  const ChatResponse response = make_client(server.base_url(), quick())->complete(request());
  EXPECT_GE(seconds_since(start), 1.0) << "Retry-After ignored: the backoff alone is 10 ms";
  EXPECT_EQ(response.content, "finally");
  EXPECT_EQ(response.attempts, 2);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, AServerErrorIsRetried) {
  ScriptedServer server(
      json::parse(R"({"replies": [{"status": 500}, {"content": "second try"}]})"));
  const ChatResponse response = make_client(server.base_url(), quick())->complete(request());
  EXPECT_EQ(response.content, "second try");
  EXPECT_EQ(response.attempts, 2);
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, PersistentServerErrorsRunOutOfRetries) {
  ScriptedServer server(json::parse(R"({"default": {"status": 503, "error": "overloaded"}})"));
  const auto client = make_client(server.base_url(), quick());
  const LlmError error = failure_of(*client);
  EXPECT_EQ(error.kind(), LlmError::Kind::kTransient);
  EXPECT_EQ(error.http_status(), 503);
  EXPECT_TRUE(mentions(error, "overloaded")) << error.what();
  EXPECT_TRUE(mentions(error, "3 attempts")) << error.what();
  EXPECT_TRUE(mentions(error, server.base_url() + "/chat/completions")) << error.what();
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(HttpClient, AnAuthFailureIsNotRetried) {
  ScriptedServer server(json::parse(R"({"replies": [{"status": 401, "error": "invalid api key"}],
                                        "default": {"content": "a retry would succeed"}})"));
  const LlmError error = failure_of(*make_client(server.base_url(), quick()));
  EXPECT_EQ(error.kind(), LlmError::Kind::kAuth);
  EXPECT_EQ(error.http_status(), 401);
  EXPECT_TRUE(mentions(error, "CUDAL1_API_KEY")) << error.what();
  EXPECT_TRUE(mentions(error, "invalid api key")) << error.what();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpClient, AnUnknownModelIsABadRequestNamingTheModel) {
  ScriptedServer server(json::parse(R"({"replies": [{"status": 404, "error": "no such model"}],
                                        "default": {"content": "a retry would succeed"}})"));
  const LlmError error = failure_of(*make_client(server.base_url(), quick()));
  EXPECT_EQ(error.kind(), LlmError::Kind::kBadRequest);
  EXPECT_EQ(error.http_status(), 404);
  EXPECT_TRUE(mentions(error, "no such model")) << error.what();
  EXPECT_TRUE(mentions(error, "test-model")) << error.what();
  EXPECT_TRUE(mentions(error, "base URL")) << error.what();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpClient, AWrongPathIsABadRequestNamingTheUrl) {
  ScriptedServer server(json::parse(R"({"default": {"content": "unreachable"}})"));
  const std::string wrong = "http://127.0.0.1:" + std::to_string(server.port()) + "/wrong";
  const LlmError error = failure_of(*make_client(wrong, quick()));
  EXPECT_EQ(error.kind(), LlmError::Kind::kBadRequest);
  EXPECT_TRUE(mentions(error, wrong + "/chat/completions")) << error.what();
}

TEST(HttpClient, ValidationErrorsAreNotRetried) {
  ScriptedServer server(json::parse(R"({"replies": [{"status": 422, "error": "prompt too long"},
                                                    {"status": 400, "error": "bad temperature"}],
                                        "default": {"content": "a retry would succeed"}})"));
  const auto client = make_client(server.base_url(), quick());
  const LlmError unprocessable = failure_of(*client);
  EXPECT_EQ(unprocessable.kind(), LlmError::Kind::kBadRequest);
  EXPECT_TRUE(mentions(unprocessable, "prompt too long")) << unprocessable.what();
  const LlmError bad = failure_of(*client);
  EXPECT_EQ(bad.kind(), LlmError::Kind::kBadRequest);
  EXPECT_TRUE(mentions(bad, "bad temperature")) << bad.what();
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, MalformedJsonIsNotRetried) {
  ScriptedServer server(json::parse(R"({"replies": [{"raw": "{\"choices\": [ oops"}],
                                        "default": {"content": "a retry would succeed"}})"));
  const LlmError error = failure_of(*make_client(server.base_url(), quick()));
  EXPECT_EQ(error.kind(), LlmError::Kind::kMalformed);
  EXPECT_TRUE(mentions(error, "oops")) << error.what();
  EXPECT_TRUE(mentions(error, server.base_url())) << error.what();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpClient, AReplyOverTheSizeLimitIsRefused) {
  const json script = {{"default", json::object({{"content", std::string(5000, 'x')}})}};
  ScriptedServer server(script);
  ClientOptions options = quick();
  options.max_response_bytes = 1000;
  const LlmError error = failure_of(*make_client(server.base_url(), options));
  EXPECT_EQ(error.kind(), LlmError::Kind::kMalformed);
  EXPECT_TRUE(mentions(error, "larger than 1000 bytes")) << error.what();
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpClient, AnEmptyReplyIsEmpty) {
  ScriptedServer server(json::parse(R"({"default": {"content": "  \n"}})"));
  const LlmError error = failure_of(*make_client(server.base_url(), quick()));
  EXPECT_EQ(error.kind(), LlmError::Kind::kEmpty);
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST(HttpClient, ASlowReplyTimesOutAfterTheRetries) {
  ScriptedServer server(json::parse(R"({"default": {"delay_s": 30, "content": "too late"}})"));
  ClientOptions options = quick();
  options.request_timeout_s = 0.3;
  options.max_retries = 1;
  const auto start = Clock::now();
  const LlmError error = failure_of(*make_client(server.base_url(), options));
  // Far under the reply's 30 s, far over two 0.3 s attempts on a loaded machine.
  EXPECT_LT(seconds_since(start), 10.0);
  EXPECT_EQ(error.kind(), LlmError::Kind::kTransient);
  EXPECT_EQ(error.http_status(), 0);
  EXPECT_TRUE(mentions(error, "timed out")) << error.what();
  EXPECT_TRUE(mentions(error, "2 attempts")) << error.what();
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(HttpClient, NoMoreThanConcurrencyRequestsAreInFlight) {
  ScriptedServer server(json::parse(R"({"default": {"delay_s": 0.5, "content": "ok"}})"));
  ClientOptions options = quick();
  options.concurrency = 2;
  const auto client = make_client(server.base_url(), options);
  std::vector<std::string> replies(6);
  std::vector<std::thread> callers;
  const auto start = Clock::now();
  for (auto& reply : replies) {
    callers.emplace_back([&client, &reply] { reply = client->complete(request()).content; });
  }
  for (auto& caller : callers) caller.join();
  const double elapsed = seconds_since(start);
  for (const auto& reply : replies) EXPECT_EQ(reply, "ok");
  // Load can only make this longer; that both slots were used shows in the server's count.
  EXPECT_GE(elapsed, 1.5) << "six half-second replies, two at a time";
  int most = 0;
  for (const json& seen : server.requests()) most = std::max(most, seen["in_flight"].get<int>());
  EXPECT_EQ(most, 2);
}

TEST(HttpClient, AClosedPortFailsQuicklyAsTransient) {
  const std::string url = "http://127.0.0.1:" + std::to_string(closed_port()) + "/v1";
  const auto start = Clock::now();
  const LlmError error = failure_of(*make_client(url, quick()));
  // Not the 10 s request timeout: a refused connection is not waited for.
  EXPECT_LT(seconds_since(start), 8.0);
  EXPECT_EQ(error.kind(), LlmError::Kind::kTransient);
  EXPECT_EQ(error.http_status(), 0);
  EXPECT_TRUE(mentions(error, url)) << error.what();
}

TEST(HttpClient, AnUnknownHostIsTransientAndNamed) {
  ClientOptions options = quick();
  options.max_retries = 1;
  const LlmError error = failure_of(*make_client("http://nonexistent.invalid/v1", options));
  EXPECT_EQ(error.kind(), LlmError::Kind::kTransient);
  EXPECT_TRUE(mentions(error, "nonexistent.invalid")) << error.what();
}

TEST(TestLlmServer, StopsOnSigtermDuringASlowReply) {
  ScriptedServer server(json::parse(R"({"default": {"delay_s": 30, "content": "never"}})"));
  ClientOptions options = quick();
  options.max_retries = 0;
  std::thread caller([&] { failure_of(*make_client(server.base_url(), options)); });
  while (server.requests().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto status = server.terminate(5);
  caller.join();
  ASSERT_TRUE(status) << "still running 5 s after SIGTERM";
  EXPECT_FALSE(status->signaled);
  EXPECT_EQ(status->code, 0);
}

}  // namespace
}  // namespace cudal1::llm
