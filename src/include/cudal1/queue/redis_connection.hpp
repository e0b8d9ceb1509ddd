// One connection to the queue's Redis server (hiredis, synchronous; one per thread). Commands
// are retried across a lost connection or a Redis restart: every command the queue sends is
// safe to repeat (see docs/scale-out.md, "Failure behaviour").
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cudal1/queue/redis_address.hpp"

namespace cudal1::queue {

// A reply, copied out of hiredis.
struct RedisValue {
  enum class Kind { kNil, kString, kInteger, kArray, kStatus };
  Kind kind = Kind::kNil;
  std::string text;  // kString, kStatus
  long long integer = 0;
  std::vector<RedisValue> items;  // kArray

  bool is_nil() const { return kind == Kind::kNil; }
  // The text of a string or status; "" for nil. Throws for an array.
  const std::string& str() const;
  // The text of field `name` in a flat [field, value, ...] array (stream entries, HGETALL).
  std::string field(const std::string& name) const;
};

// Redis answered with an error (wrong type, unknown group, a script's error, ...).
class RedisReplyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  bool starts_with(const char* code) const { return std::string_view(what()).starts_with(code); }
};

// Redis cannot be used as configured: the user has to fix the address or the password.
class RedisUnusable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The password is wrong or missing, or the database does not exist. Not retried.
class RedisRefused : public RedisUnusable {
 public:
  using RedisUnusable::RedisUnusable;
};

// The connection is down and the caller asked to stop while waiting for it.
class RedisStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReconnectPolicy {
  // First wait after a failure, doubled up to max_delay_s: a restarting Redis is back in about
  // a second, and a long outage costs one attempt every few seconds per connection.
  double first_delay_s = 0.2;
  double max_delay_s = 5;
  // Give up (RedisUnavailable) after this long without a connection; 0: never.
  double give_up_after_s = 0;
};

// No connection within the policy's give_up_after_s.
class RedisUnavailable : public RedisUnusable {
 public:
  using RedisUnusable::RedisUnusable;
};

class RedisConnection {
 public:
  // Connects on first use. `stop`, when given and true, ends waiting for a lost connection
  // (RedisStopped); it is asked on the thread that sends. `note` is told when the connection is
  // lost and when it is back (for a log line).
  RedisConnection(RedisAddress address, ReconnectPolicy policy = {},
                  std::function<bool()> stop = {},
                  std::function<void(const std::string&)> note = {});
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends one command and returns its reply; reconnects and sends it again while the server
  // cannot be reached. `wait_s`: how long the reply may take (XREADGROUP BLOCK).
  RedisValue command(const std::vector<std::string>& argv, double wait_s = 0);
  // Connects now (or throws RedisUnavailable / RedisRefused after the policy's limits).
  void ensure_connected();

  const RedisAddress& address() const { return address_; }

 private:
  struct Context;
  bool connect_once(std::string& why);
  void drop();

  RedisAddress address_;
  ReconnectPolicy policy_;
  std::function<bool()> stop_;
  std::function<void(const std::string&)> note_;
  std::unique_ptr<Context> context_;
  bool lost_ = false;  // a loss was reported and no reconnection yet
};

}  // namespace cudal1::queue
