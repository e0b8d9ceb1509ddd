#include "cudal1/queue/worker_registry.hpp"

#include <fmt/format.h>

#include <cmath>

#include "cudal1/queue/keys.hpp"

namespace cudal1::queue {
namespace {

using nlohmann::json;

// Names whose last beat is older than this leave the sorted set (their hash expired long ago).
constexpr double kForgetAfterS = 24 * 3600;

json parse_or(const std::string& text, json fallback) {
  if (text.empty()) return fallback;
  json value = json::parse(text, nullptr, false);
  return value.is_discarded() ? fallback : value;
}

double to_double(const std::string& text) {
  try {
    return text.empty() ? 0.0 : std::stod(text);
  } catch (const std::exception&) {
    return 0.0;
  }
}

WorkerRecord from_fields(const std::string& name, const RedisValue& fields) {
  WorkerRecord r;
  r.name = name;
  r.host = fields.field("host");
  r.pid = static_cast<long long>(to_double(fields.field("pid")));
  r.kind = fields.field("kind");
  r.devices = parse_or(fields.field("devices"), json::array());
  r.jobs = parse_or(fields.field("jobs"), json::array());
  r.toolchain = parse_or(fields.field("toolchain"), json::object());
  r.capacity = static_cast<std::size_t>(to_double(fields.field("capacity")));
  r.finished = static_cast<std::size_t>(to_double(fields.field("finished")));
  r.started_at = to_double(fields.field("started_at"));
  r.last_beat = to_double(fields.field("last_beat"));
  return r;
}

}  // namespace

void beat(RedisConnection& redis, const WorkerRecord& r, double ttl_s) {
  const std::string key = keys::worker(r.name);
  redis.command({"HSET",       key,
                 "host",       r.host,
                 "pid",        std::to_string(r.pid),
                 "kind",       r.kind,
                 "devices",    r.devices.dump(),
                 "jobs",       r.jobs.dump(-1, ' ', false, json::error_handler_t::replace),
                 "toolchain",  r.toolchain.dump(-1, ' ', false, json::error_handler_t::replace),
                 "capacity",   std::to_string(r.capacity),
                 "finished",   std::to_string(r.finished),
                 "started_at", fmt::format("{:.3f}", r.started_at),
                 "last_beat",  fmt::format("{:.3f}", r.last_beat)});
  redis.command({"PEXPIRE", key, std::to_string(static_cast<long long>(std::ceil(ttl_s * 1000)))});
  redis.command({"ZADD", keys::kWorkers, fmt::format("{:.3f}", r.last_beat), r.name});
  redis.command({"ZREMRANGEBYSCORE", keys::kWorkers, "-inf",
                 fmt::format("({:.3f}", r.last_beat - kForgetAfterS)});
}

void leave(RedisConnection& redis, const std::string& name) {
  redis.command({"DEL", keys::worker(name)});
  redis.command({"ZREM", keys::kWorkers, name});
}

std::optional<WorkerRecord> find_worker(RedisConnection& redis, const std::string& name) {
  const RedisValue fields = redis.command({"HGETALL", keys::worker(name)});
  if (fields.items.empty()) return std::nullopt;
  return from_fields(name, fields);
}

std::vector<WorkerRecord> live_workers(RedisConnection& redis) {
  std::vector<WorkerRecord> workers;
  const RedisValue names = redis.command({"ZRANGE", keys::kWorkers, "0", "-1"});
  for (const RedisValue& name : names.items) {
    if (auto record = find_worker(redis, name.str())) workers.push_back(std::move(*record));
  }
  return workers;
}

}  // namespace cudal1::queue
