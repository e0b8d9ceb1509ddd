// Live workers, as their heartbeats leave them in Redis: a hash per worker that expires unless
// renewed, and a sorted set of names by last beat (docs/scale-out.md, "Heartbeats").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::queue {

struct WorkerRecord {
  std::string name;
  std::string host;
  long long pid = 0;
  std::string kind;                                  // keys::kCpu or keys::kCuda
  nlohmann::json devices = nlohmann::json::array();  // ["cuda:0", ...] with GPU names where known
  nlohmann::json jobs = nlohmann::json::array();  // current jobs: id, task, candidate, device, ...
  nlohmann::json toolchain = nlohmann::json::object();  // what its evaluations run with
  std::size_t capacity = 0;                             // jobs it takes at once
  std::size_t finished = 0;                             // results it published since it started
  double started_at = 0;
  double last_beat = 0;  // Unix seconds
};

// Writes the record with a time to live; a worker that stops beating disappears after it.
void beat(RedisConnection& redis, const WorkerRecord& record, double ttl_s);
// Removes a worker that stops cleanly.
void leave(RedisConnection& redis, const std::string& name);
// Workers whose record has not expired, by name.
std::vector<WorkerRecord> live_workers(RedisConnection& redis);
// The record of one worker, if it is live.
std::optional<WorkerRecord> find_worker(RedisConnection& redis, const std::string& name);

}  // namespace cudal1::queue
