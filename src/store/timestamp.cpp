#include <time.h>

#include <chrono>
#include <string>

#include "cudal1/store/store.hpp"

namespace cudal1::store {

std::string now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[sizeof "2026-11-21T23:59:01Z"];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace cudal1::store
