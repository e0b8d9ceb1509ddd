#include "http_post.hpp"

#include <curl/curl.h>
#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace cudal1::llm {
namespace {

void initialise_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      throw std::runtime_error("libcurl could not be initialised (curl_global_init failed)");
    }
  });
}

struct ReplySink {
  std::string* body;
  std::size_t limit;
  bool overflowed = false;
  std::string retry_after;  // raw header value of the last response seen
};

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<ReplySink*>(user);
  const std::size_t bytes = size * count;
  if (sink->body->size() + bytes > sink->limit) {
    sink->overflowed = true;
    return 0;  // any short count makes libcurl abort the transfer
  }
  sink->body->append(data, bytes);
  return bytes;
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && std::isspace(static_cast<unsigned char>(text[start]))) ++start;
  return text.substr(start);
}

std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
  auto* sink = static_cast<ReplySink*>(user);
  const std::size_t bytes = size * count;
  const std::string line(data, bytes);
  // A status line starts a new response (after "100 Continue", say): forget the earlier one's.
  if (line.rfind("HTTP/", 0) == 0) sink->retry_after.clear();
  constexpr char kName[] = "retry-after:";
  constexpr std::size_t kNameLength = sizeof(kName) - 1;
  if (line.size() > kNameLength && ::strncasecmp(line.c_str(), kName, kNameLength) == 0) {
    sink->retry_after = trimmed(line.substr(kNameLength));
  }
  return bytes;
}

// Retry-After is either delay-seconds or an HTTP-date (RFC 9110 section 10.2.3).
std::optional<double> retry_after_seconds(const std::string& value) {
  if (value.empty()) return std::nullopt;
  double seconds = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (error == std::errc() && end == value.data() + value.size() && std::isfinite(seconds)) {
    return std::max(0.0, seconds);
  }
  const std::time_t when = curl_getdate(value.c_str(), nullptr);
  if (when < 0) return std::nullopt;
  return std::max(0.0, std::difftime(when, std::time(nullptr)));
}

long milliseconds(double seconds) {
  return seconds <= 0 ? 0L : std::max(1L, std::lround(seconds * 1000.0));
}

HttpReply::Transport classify(CURLcode code) {
  switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
      return HttpReply::Transport::kMisconfigured;
    case CURLE_FILESIZE_EXCEEDED:
      return HttpReply::Transport::kTooLarge;
    default:
      return HttpReply::Transport::kUnreachable;
  }
}

struct EasyDeleter {
  void operator()(CURL* easy) const { curl_easy_cleanup(easy); }
};
struct HeaderListDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

}  // namespace

HttpReply post_json(const HttpPost& post) {
  initialise_curl_once();
  // A handle per request: requests run on many threads and an easy handle is not shareable.
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  if (!easy) throw std::runtime_error("libcurl could not create a request handle");
  std::unique_ptr<curl_slist, HeaderListDeleter> headers;
  for (const std::string& header : post.headers) {
    curl_slist* extended = curl_slist_append(headers.get(), header.c_str());
    if (extended == nullptr)
      throw std::runtime_error("libcurl could not build the request headers");
    (void)headers.release();
    headers.reset(extended);
  }

  HttpReply reply;
  ReplySink sink{&reply.body, post.max_reply_bytes, false, {}};
  char error_buffer[CURL_ERROR_SIZE] = {};
  CURL* handle = easy.get();
  curl_easy_setopt(handle, CURLOPT_URL, post.url.c_str());
  curl_easy_setopt(handle, CURLOPT_POST, 1L);
  curl_easy_setopt(handle, CURLOPT_POSTFIELDS, post.body.c_str());
  curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post.body.size()));
  curl_easy_setopt(handle, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(handle, CURLOPT_USERAGENT, "cudal1");
  // Signals cannot interrupt name resolution safely when many threads issue requests.
  curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds(post.connect_timeout_s));
  curl_easy_setopt(handle, CURLOPT_TIMEOUT_MS, milliseconds(post.total_timeout_s));
  curl_easy_setopt(handle, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(post.max_reply_bytes));
  curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(handle, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(handle, CURLOPT_HEADERDATA, &sink);
  curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error_buffer);

  const CURLcode code = curl_easy_perform(handle);
  reply.retry_after_s = retry_after_seconds(sink.retry_after);
  if (code == CURLE_OK) {
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &reply.status);
    return reply;
  }
  reply.transport = sink.overflowed ? HttpReply::Transport::kTooLarge : classify(code);
  reply.transport_error =
      error_buffer[0] != '\0' ? trimmed(error_buffer) : std::string(curl_easy_strerror(code));
  return reply;
}

}  // namespace cudal1::llm
