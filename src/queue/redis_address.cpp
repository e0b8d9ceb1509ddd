#include "cudal1/queue/redis_address.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>

#include "cudal1/common/error.hpp"

namespace cudal1::queue {
namespace {

constexpr std::string_view kScheme = "redis://";

[[noreturn]] void bad_url(const std::string& url, const std::string& why) {
  throw InputError(fmt::format(
      "--queue '{}': {}; expected redis://[:PASSWORD@]HOST:PORT[/DB], e.g. redis://10.0.0.5:6379/0",
      url, why));
}

int parse_number(const std::string& url, std::string_view text, int low, int high,
                 const char* what) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < low ||
      value > high) {
    bad_url(url, fmt::format("the {} '{}' is not a number from {} to {}", what, text, low, high));
  }
  return value;
}

std::string percent_decoded(const std::string& url, std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    int byte = 0;
    const char* begin = text.data() + i + 1;
    if (i + 2 >= text.size() || std::from_chars(begin, begin + 2, byte, 16).ptr != begin + 2) {
      bad_url(url, "the password has a '%' that is not followed by two hex digits");
    }
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

}  // namespace

std::string RedisAddress::display() const {
  return fmt::format("redis://{}{}:{}/{}", password.empty() ? "" : ":***@", host, port, db);
}

RedisAddress parse_redis_url(const std::string& url) {
  if (!url.starts_with(kScheme)) bad_url(url, "it does not start with redis://");
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  RedisAddress address;
  // The password ends at the last '@': a percent-encoded one has none, a raw one might.
  if (const auto at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view user_info = rest.substr(0, at);
    const auto colon = user_info.find(':');
    if (colon == std::string_view::npos) {
      bad_url(url, "a password is written ':PASSWORD@' (user names are not supported)");
    }
    address.password = percent_decoded(url, user_info.substr(colon + 1));
    rest = rest.substr(at + 1);
  }
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) address.db = parse_number(url, db, 0, 1 << 20, "database number");
    rest = rest.substr(0, slash);
  }
  const auto colon = rest.rfind(':');
  std::string_view host = rest;
  if (colon != std::string_view::npos) {
    address.port = parse_number(url, rest.substr(colon + 1), 1, 65535, "port");
    host = rest.substr(0, colon);
  }
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  if (host.empty()) bad_url(url, "no host");
  address.host = std::string(host);
  if (address.password.empty()) {
    if (const char* password = std::getenv("CUDAL1_REDIS_PASSWORD")) address.password = password;
  }
  return address;
}

}  // namespace cudal1::queue
