// One HTTP POST through libcurl with the limits an LLM client needs: time-outs, a cap on the
// reply size, and the Retry-After header kept for the retry policy.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cudal1::llm {

struct HttpPost {
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  double connect_timeout_s = 30;
  double total_timeout_s = 600;  // <= 0: no limit
  std::size_t max_reply_bytes = 16u << 20;
};

struct HttpReply {
  enum class Transport {
    kDelivered,      // a complete reply arrived, whatever its status
    kTooLarge,       // the reply passed max_reply_bytes and was abandoned
    kUnreachable,    // connection refused, DNS failure, time-out, reset: may pass on retry
    kMisconfigured,  // bad URL, unsupported scheme, TLS verification failure: will not pass
  };
  Transport transport = Transport::kDelivered;
  long status = 0;  // HTTP status when delivered
  std::string body;
  std::optional<double> retry_after_s;  // the server's Retry-After, in seconds from now
  std::string transport_error;          // curl's explanation when not delivered
};

// Never throws for network trouble (that is in the reply); throws std::runtime_error only when
// libcurl itself cannot be set up.
HttpReply post_json(const HttpPost& post);

}  // namespace cudal1::llm
