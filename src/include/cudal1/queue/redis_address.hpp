// Where the queue's Redis server is: --queue redis://[:PASSWORD@]HOST:PORT[/DB].
#pragma once

#include <string>

namespace cudal1::queue {

struct RedisAddress {
  std::string host;
  int port = 6379;
  int db = 0;
  std::string password;  // from the URL, else $CUDAL1_REDIS_PASSWORD; empty: no AUTH

  // The URL without its password (redis://:***@host:port/db), for messages and status.
  std::string display() const;
};

// Throws InputError naming --queue and what is wrong. A password in the URL may be
// percent-encoded (%40 for '@'); without one, $CUDAL1_REDIS_PASSWORD is used when set.
RedisAddress parse_redis_url(const std::string& url);

}  // namespace cudal1::queue
