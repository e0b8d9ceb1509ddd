#include "cudal1/queue/redis_connection.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace cudal1::queue {
namespace {

using Clock = std::chrono::steady_clock;

// A TCP connect to a reachable host takes milliseconds; a host that drops packets is not waited
// for longer than this before the next attempt.
constexpr double kConnectTimeoutS = 5;
// How long a plain command's reply may take: Redis answers in microseconds, so this only ends
// waiting on a server that vanished without closing the connection.
constexpr double kReplyTimeoutS = 15;

timeval to_timeval(double seconds) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(seconds);
  tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
  return tv;
}

RedisValue copy_reply(const redisReply& reply) {
  RedisValue value;
  switch (reply.type) {
    case REDIS_REPLY_STRING:
      value.kind = RedisValue::Kind::kString;
      value.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_STATUS:
      value.kind = RedisValue::Kind::kStatus;
      value.text.assign(reply.str, reply.len);
      break;
    case REDIS_REPLY_INTEGER:
      value.kind = RedisValue::Kind::kInteger;
      value.integer = reply.integer;
      break;
    case REDIS_REPLY_ARRAY:
      value.kind = RedisValue::Kind::kArray;
      value.items.reserve(reply.elements);
      for (std::size_t i = 0; i < reply.elements; ++i) {
        value.items.push_back(copy_reply(*reply.element[i]));
      }
      break;
    default:
      break;  // nil
  }
  return value;
}

// The connection broke (reset, closed, timed out): the command is sent again on a new one.
struct ConnectionLost {
  std::string why;
};

bool is_refusal(const std::string& error) {
  return error.starts_with("NOAUTH") || error.starts_with("WRONGPASS") ||
         error.starts_with("ERR invalid password") || error.starts_with("ERR AUTH");
}

// Answers of a server that is starting or busy: the same command succeeds a little later.
bool is_transient(const std::string& error) {
  // "BUSY " (a long script runs), not BUSYGROUP (a group that exists: an answer, not a state).
  return error.starts_with("LOADING") || error.starts_with("BUSY ") ||
         error.starts_with("TRYAGAIN") || error.starts_with("MASTERDOWN");
}

}  // namespace

const std::string& RedisValue::str() const {
  static const std::string kEmpty;
  if (kind == Kind::kArray) throw std::runtime_error("redis: expected a string, got an array");
  return kind == Kind::kNil ? kEmpty : text;
}

std::string RedisValue::field(const std::string& name) const {
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (items[i].str() == name) return items[i + 1].str();
  }
  return "";
}

struct RedisConnection::Context {
  redisContext* redis = nullptr;
  ~Context() {
    if (redis != nullptr) redisFree(redis);
  }
  // One command on the open connection; an error reply leaves its text in `error`.
  RedisValue send(const std::vector<std::string>& argv, double wait_s, std::string& error) {
    redisSetTimeout(redis, to_timeval(kReplyTimeoutS + wait_s));
    std::vector<const char*> pointers;
    std::vector<std::size_t> lengths;
    for (const auto& arg : argv) {
      pointers.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(redis, static_cast<int>(argv.size()), pointers.data(), lengths.data()));
    if (reply == nullptr) throw ConnectionLost{redis->errstr};
    RedisValue value;
    if (reply->type == REDIS_REPLY_ERROR) {
      error.assign(reply->str, reply->len);
    } else {
      value = copy_reply(*reply);
    }
    freeReplyObject(reply);
    return value;
  }
};

RedisConnection::RedisConnection(RedisAddress address, ReconnectPolicy policy,
                                 std::function<bool()> stop,
                                 std::function<void(const std::string&)> note)
    : address_(std::move(address)),
      policy_(policy),
      stop_(std::move(stop)),
      note_(std::move(note)),
      context_(std::make_unique<Context>()) {}

RedisConnection::~RedisConnection() = default;

void RedisConnection::drop() {
  context_ = std::make_unique<Context>();
}

bool RedisConnection::connect_once(std::string& why) {
  drop();
  redisContext* redis =
      redisConnectWithTimeout(address_.host.c_str(), address_.port, to_timeval(kConnectTimeoutS));
  if (redis == nullptr) {
    why = "cannot allocate a connection";
    return false;
  }
  context_->redis = redis;
  if (redis->err != 0) {
    why = redis->errstr;
    drop();
    return false;
  }
  redisEnableKeepAlive(redis);
  std::vector<std::vector<std::string>> setup;
  if (!address_.password.empty()) setup.push_back({"AUTH", address_.password});
  if (address_.db != 0) setup.push_back({"SELECT", std::to_string(address_.db)});
  for (const auto& argv : setup) {
    std::string error;
    try {
      context_->send(argv, 0, error);
    } catch (const ConnectionLost& lost) {
      why = lost.why;
      drop();
      return false;
    }
    if (!error.empty()) {
      drop();
      const bool auth = argv[0] == "AUTH";
      throw RedisRefused(fmt::format(
          "{}: {} was refused ({}): {}", address_.display(), argv[0], error,
          auth ? "give the right password in the URL (redis://:PASSWORD@HOST:PORT) or in "
                 "$CUDAL1_REDIS_PASSWORD"
               : "use a database number the server has (redis.conf's `databases`, 16 by default)"));
    }
  }
  return true;
}

void RedisConnection::ensure_connected() {
  if (context_->redis != nullptr) return;
  const auto start = Clock::now();
  double delay = policy_.first_delay_s;
  for (;;) {
    std::string why;
    if (connect_once(why)) {
      if (lost_ && note_) note_(fmt::format("connected to {} again", address_.display()));
      lost_ = false;
      return;
    }
    if (!lost_ && note_) {
      note_(fmt::format("cannot reach {} ({}); retrying", address_.display(), why));
    }
    lost_ = true;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (policy_.give_up_after_s > 0 && waited >= policy_.give_up_after_s) {
      throw RedisUnavailable(fmt::format(
          "cannot connect to {} ({}) for {:.0f} s: is redis-server running there and reachable "
          "from this host?",
          address_.display(), why, waited));
    }
    // Slept in short steps so that a stop request is seen at once.
    const auto until = Clock::now() + std::chrono::duration<double>(delay);
    while (Clock::now() < until) {
      if (stop_ && stop_()) {
        throw RedisStopped(fmt::format("stopped while waiting for {}", address_.display()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    delay = std::min(delay * 2, policy_.max_delay_s);
  }
}

RedisValue RedisConnection::command(const std::vector<std::string>& argv, double wait_s) {
  double delay = policy_.first_delay_s;
  for (;;) {
    ensure_connected();
    std::string error;
    RedisValue value;
    try {
      value = context_->send(argv, wait_s, error);
    } catch (const ConnectionLost& lost) {
      drop();
      if (!lost_ && note_) {
        note_(fmt::format("lost the connection to {} ({}); reconnecting", address_.display(),
                          lost.why));
      }
      lost_ = true;
      continue;
    }
    if (error.empty()) return value;
    if (is_refusal(error)) {
      throw RedisRefused(
          fmt::format("{}: {} (set the password in the URL, redis://:PASSWORD@HOST:PORT, or in "
                      "$CUDAL1_REDIS_PASSWORD)",
                      address_.display(), error));
    }
    if (!is_transient(error)) throw RedisReplyError(error);
    if (stop_ && stop_()) throw RedisStopped(error);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    delay = std::min(delay * 2, policy_.max_delay_s);
  }
}

}  // namespace cudal1::queue
