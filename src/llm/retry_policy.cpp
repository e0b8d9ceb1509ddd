#include <algorithm>
#include <cmath>

#include "cudal1/llm/client.hpp"

namespace cudal1::llm {
namespace {

// A server asking for more than this is down for maintenance rather than rate limiting; a
// longer wait would look like a hang to whoever runs the optimizer.
constexpr double kRetryAfterCap_s = 600.0;

// Doubling more often than this overflows nothing useful: the cap is reached long before.
constexpr int kMaxDoublings = 60;

}  // namespace

RetryPolicy::RetryPolicy(const ClientOptions& options, unsigned seed)
    : initial_(std::max(0.0, options.backoff_initial_s)),
      cap_(std::max(0.0, options.backoff_max_s)),
      state_(seed) {}

bool RetryPolicy::retryable(int http_status) {
  // 408 request time-out, 409 conflict (some gateways under load), 429 rate limit, 5xx server
  // trouble and 0 (no reply at all) may pass; the other 4xx will fail the same way again.
  return http_status == 0 || http_status == 408 || http_status == 409 || http_status == 429 ||
         (http_status >= 500 && http_status <= 599);
}

double RetryPolicy::delay_s(int retry, std::optional<double> retry_after_s) {
  if (retry_after_s && std::isfinite(*retry_after_s)) {
    return std::clamp(*retry_after_s, 0.0, kRetryAfterCap_s);
  }
  const int doublings = std::clamp(retry - 1, 0, kMaxDoublings);
  const double ceiling = std::min(initial_ * std::ldexp(1.0, doublings), cap_);
  // Full jitter: clients that failed together do not retry together. The generator is a Weyl
  // sequence through a 32-bit avalanche mix, deterministic per seed so tests can replay it.
  state_ += 0x9E3779B9u;
  unsigned mixed = state_;
  mixed = (mixed ^ (mixed >> 16)) * 0x85EBCA6Bu;
  mixed = (mixed ^ (mixed >> 13)) * 0xC2B2AE35u;
  mixed ^= mixed >> 16;
  const double unit = static_cast<double>(mixed) / 4294967296.0;  // in [0, 1)
  return ceiling * unit;
}

}  // namespace cudal1::llm
