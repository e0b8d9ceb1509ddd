#include "http_client.hpp"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "http_post.hpp"

namespace cudal1::llm {
namespace {

using nlohmann::json;

// Enough of an error page to recognise it without flooding a log with HTML.
constexpr std::size_t kBodyExcerpt = 300;

std::string excerpt(const std::string& text) {
  std::string out = text.size() > kBodyExcerpt ? text.substr(0, kBodyExcerpt) + "..." : text;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Servers spell errors differently: OpenAI and vLLM {"error": {"message"}}, Ollama
// {"error": "..."}, FastAPI validation {"detail": ...}; otherwise the body itself.
std::string server_message(const std::string& body) {
  const json parsed = json::parse(body, nullptr, false);
  if (parsed.is_object()) {
    if (const auto error = parsed.find("error"); error != parsed.end()) {
      if (error->is_string()) return error->get<std::string>();
      if (error->is_object()) {
        const auto message = error->find("message");
        if (message != error->end() && message->is_string()) return message->get<std::string>();
      }
    }
    for (const char* field : {"message", "detail"}) {
      if (const auto value = parsed.find(field); value != parsed.end()) {
        return value->is_string() ? value->get<std::string>() : value->dump();
      }
    }
  }
  return body.empty() ? "(empty body)" : excerpt(body);
}

struct Failure {
  LlmError::Kind kind;
  std::string message;
  int status = 0;
  bool retryable = false;
};

std::string status_failure(const std::string& endpoint, long status, const std::string& body) {
  return fmt::format("{} answered HTTP {}: {}", endpoint, status, server_message(body));
}

Failure classify_status(const std::string& endpoint, const HttpReply& reply,
                        const ChatRequest& request, bool key_sent) {
  const int status = static_cast<int>(reply.status);
  const std::string what = status_failure(endpoint, reply.status, reply.body);
  if (status == 401 || status == 403) {
    return {LlmError::Kind::kAuth,
            what + (key_sent ? "; check the API key in CUDAL1_API_KEY"
                             : "; no API key was sent: set CUDAL1_API_KEY"),
            status};
  }
  if (status == 404) {
    return {LlmError::Kind::kBadRequest,
            fmt::format("{}; check the base URL (requests go to <base>/chat/completions, usually "
                        "under /v1) and the model name '{}'",
                        what, request.model),
            status};
  }
  if (RetryPolicy::retryable(status)) return {LlmError::Kind::kTransient, what, status, true};
  // 400, 422 and anything else unexpected (405, 413, a redirect) will fail the same way again.
  return {LlmError::Kind::kBadRequest, fmt::format("{} (model '{}')", what, request.model), status};
}

Failure classify_transport(const std::string& endpoint, const HttpPost& post,
                           const HttpReply& reply) {
  switch (reply.transport) {
    case HttpReply::Transport::kTooLarge:
      return {LlmError::Kind::kMalformed,
              fmt::format("{}: reply larger than {} bytes (max_response_bytes)", endpoint,
                          post.max_reply_bytes)};
    case HttpReply::Transport::kMisconfigured:
      return {LlmError::Kind::kBadRequest,
              fmt::format("cannot send a request to {}: {}", endpoint, reply.transport_error)};
    default:
      return {LlmError::Kind::kTransient,
              fmt::format("no reply from {}: {}", endpoint, reply.transport_error), 0, true};
  }
}

ChatResponse read_completion(const std::string& endpoint, const HttpReply& reply) {
  const json body = json::parse(reply.body, nullptr, false);
  if (body.is_discarded()) {
    throw LlmError(LlmError::Kind::kMalformed,
                   fmt::format("{} answered HTTP {} with a body that is not JSON: {}", endpoint,
                               reply.status, excerpt(reply.body)),
                   static_cast<int>(reply.status));
  }
  try {
    return parse_chat_completion(body);
  } catch (const LlmError& error) {
    throw LlmError(error.kind(), fmt::format("{}: {}", endpoint, error.what()),
                   static_cast<int>(reply.status));
  }
}

std::string strip_trailing_slashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

}  // namespace

HttpChatClient::HttpChatClient(std::string base_url, ClientOptions options)
    : base_url_(strip_trailing_slashes(std::move(base_url))),
      endpoint_(base_url_ + "/chat/completions"),
      options_(std::move(options)),
      slots_(options_.concurrency),
      // Processes started together must not retry in lockstep: each gets its own jitter.
      policy_(options_, std::random_device{}()) {
  if (options_.max_retries < 0) {
    throw std::invalid_argument("LLM client max_retries must not be negative");
  }
}

double HttpChatClient::next_delay_s(int retry, std::optional<double> retry_after_s) {
  std::lock_guard lock(policy_mutex_);
  return policy_.delay_s(retry, retry_after_s);
}

ChatResponse HttpChatClient::complete(const ChatRequest& request) {
  HttpPost post;
  post.url = endpoint_;
  post.body = request.to_openai_body().dump(-1, ' ', false, json::error_handler_t::replace);
  post.headers = {"Content-Type: application/json", "Accept: application/json",
                  // Without this libcurl waits for "100 Continue" before sending long prompts.
                  "Expect:"};
  const bool key_sent = !options_.api_key.empty();
  if (key_sent) post.headers.push_back("Authorization: Bearer " + options_.api_key);
  post.connect_timeout_s = options_.connect_timeout_s;
  post.total_timeout_s = options_.request_timeout_s;
  post.max_reply_bytes = options_.max_response_bytes;

  for (int attempt = 1;; ++attempt) {
    HttpReply reply;
    {
      // The slot covers the request only: a call waiting out its backoff leaves room for others.
      RequestSlots::Held slot(slots_);
      reply = post_json(post);
    }
    const bool delivered = reply.transport == HttpReply::Transport::kDelivered;
    if (delivered && reply.status >= 200 && reply.status < 300) {
      ChatResponse response = read_completion(endpoint_, reply);
      response.attempts = attempt;
      return response;
    }
    const Failure failure = delivered ? classify_status(endpoint_, reply, request, key_sent)
                                      : classify_transport(endpoint_, post, reply);
    if (!failure.retryable) throw LlmError(failure.kind, failure.message, failure.status);
    if (attempt > options_.max_retries) {
      throw LlmError(LlmError::Kind::kTransient,
                     fmt::format("gave up after {} attempt{}: {}", attempt, attempt == 1 ? "" : "s",
                                 failure.message),
                     failure.status);
    }
    const double wait_s = next_delay_s(attempt, reply.retry_after_s);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
  }
}

}  // namespace cudal1::llm
