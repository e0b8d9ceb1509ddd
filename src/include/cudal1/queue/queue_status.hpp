// `cudal1 queue status`: the live workers (host, GPUs, current jobs, last heartbeat), the jobs
// waiting, in flight and failed, and the results published per minute lately.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::queue {

// Minutes of per-minute result counts kept and shown.
inline constexpr int kThroughputMinutes = 15;

nlohmann::json queue_status(RedisConnection& redis);
// The same for people: a few lines and a table of workers.
std::string format_status(const nlohmann::json& status);

}  // namespace cudal1::queue
