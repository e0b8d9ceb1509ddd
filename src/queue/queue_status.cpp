#include "cudal1/queue/queue_status.hpp"

#include <fmt/format.h>

#include "cudal1/queue/keys.hpp"
#include "cudal1/queue/protocol.hpp"
#include "cudal1/queue/worker_registry.hpp"

namespace cudal1::queue {
namespace {

using nlohmann::json;

// Failed jobs listed by `status` (the stream keeps about a thousand).
constexpr int kRecentFailures = 5;

json job_counts(RedisConnection& redis, const std::string& kind) {
  const std::string stream = keys::jobs(kind);
  // Finished entries are deleted, so the stream holds the waiting and the delivered ones.
  const long long entries = redis.command({"XLEN", stream}).integer;
  long long in_flight = 0;
  json consumers = json::object();
  try {
    const RedisValue summary = redis.command({"XPENDING", stream, keys::kGroup});
    if (!summary.items.empty()) in_flight = summary.items[0].integer;
    if (summary.items.size() >= 4) {
      for (const RedisValue& consumer : summary.items[3].items) {
        if (consumer.items.size() < 2) continue;
        consumers[consumer.items[0].str()] = std::stoll(consumer.items[1].str());
      }
    }
  } catch (const RedisReplyError& e) {
    if (!e.starts_with("NOGROUP")) throw;  // no worker of this kind ever came
  }
  return {{"waiting", std::max(0LL, entries - in_flight)},
          {"in_flight", in_flight},
          {"in_flight_by_worker", consumers}};
}

json worker_entry(const WorkerRecord& r, double now) {
  return {{"name", r.name},
          {"host", r.host},
          {"pid", r.pid},
          {"kind", r.kind},
          {"devices", r.devices},
          {"jobs", r.jobs},
          {"capacity", r.capacity},
          {"finished", r.finished},
          {"torch", r.toolchain.value("torch", "")},
          {"started_at", r.started_at},
          {"last_beat", r.last_beat},
          {"last_beat_age_s", now - r.last_beat}};
}

json throughput(RedisConnection& redis, double now) {
  const long long minute = static_cast<long long>(now) / 60;
  json per_minute = json::array();
  long long last_5 = 0;
  long long last_15 = 0;
  for (int back = kThroughputMinutes; back >= 0; --back) {
    const RedisValue value = redis.command({"GET", keys::finished_in_minute(minute - back)});
    const long long count = value.is_nil() ? 0 : std::stoll(value.str());
    per_minute.push_back({{"minute_start", (minute - back) * 60}, {"results", count}});
    // The current minute is still filling: rates use complete minutes only.
    if (back >= 1 && back <= 5) last_5 += count;
    if (back >= 1) last_15 += count;
  }
  return {{"per_minute", per_minute},
          {"this_minute", per_minute.back()["results"]},
          {"per_minute_last_5", static_cast<double>(last_5) / 5},
          {"per_minute_last_15", static_cast<double>(last_15) / kThroughputMinutes}};
}

json failures(RedisConnection& redis) {
  const RedisValue count = redis.command({"GET", keys::kFailedCount});
  const RedisValue recent = redis.command(
      {"XREVRANGE", keys::kFailed, "+", "-", "COUNT", std::to_string(kRecentFailures)});
  json list = json::array();
  for (const RedisValue& entry : recent.items) {
    if (entry.items.size() < 2) continue;
    const std::string id = entry.items[0].str();
    list.push_back({{"job", entry.items[1].field("id")},
                    {"worker", entry.items[1].field("worker")},
                    {"reason", entry.items[1].field("reason")},
                    {"at", std::stoll(id.substr(0, id.find('-'))) / 1000.0}});
  }
  return {{"count", count.is_nil() ? 0 : std::stoll(count.str())}, {"recent", list}};
}

std::string describe_jobs(const json& jobs, double now) {
  std::string text;
  for (const json& job : jobs) {
    if (!text.empty()) text += "; ";
    text += fmt::format("{} {} vs {} on {} ({:.0f} s)", job.value("id", "").substr(0, 12),
                        job.value("candidate", ""), job.value("task", ""), job.value("device", ""),
                        now - job.value("started_at", now));
  }
  return text.empty() ? "idle" : text;
}

std::string describe_devices(const json& devices) {
  std::string text;
  for (const json& device : devices) {
    if (!text.empty()) text += ",";
    text += device.value("device", "");
    if (device.contains("name")) text += fmt::format(" ({})", device["name"].get<std::string>());
  }
  return text;
}

}  // namespace

json queue_status(RedisConnection& redis) {
  const double now = unix_now();
  json workers = json::array();
  for (const WorkerRecord& record : live_workers(redis))
    workers.push_back(worker_entry(record, now));
  json jobs = {{keys::kCpu, job_counts(redis, keys::kCpu)},
               {keys::kCuda, job_counts(redis, keys::kCuda)}};
  // The build streams of the build workers alive (their toolchains name them).
  for (const json& worker : workers) {
    const std::string kind = worker.value("kind", "");
    if (keys::is_build_kind(kind) && !jobs.contains(kind)) jobs[kind] = job_counts(redis, kind);
  }
  return {{"queue", redis.address().display()},
          {"time", now},
          {"workers", workers},
          {"jobs", jobs},
          {"waiting", jobs[keys::kCpu]["waiting"].get<long long>() +
                          jobs[keys::kCuda]["waiting"].get<long long>()},
          {"in_flight", jobs[keys::kCpu]["in_flight"].get<long long>() +
                            jobs[keys::kCuda]["in_flight"].get<long long>()},
          {"failed", failures(redis)},
          {"throughput", throughput(redis, now)}};
}

std::string format_status(const json& s) {
  const double now = s.value("time", 0.0);
  std::string out = fmt::format("queue {}\n", s.value("queue", ""));
  out += fmt::format("workers: {} live\n", s["workers"].size());
  for (const json& w : s["workers"]) {
    out += fmt::format("  {:<20} {:<20} {:<28} {}/{} busy, {} finished, beat {:.1f} s ago: {}\n",
                       w.value("name", ""), w.value("host", ""), describe_devices(w["devices"]),
                       w["jobs"].size(), w.value("capacity", 0), w.value("finished", 0),
                       w.value("last_beat_age_s", 0.0), describe_jobs(w["jobs"], now));
  }
  for (const auto& [kind, jobs] : s["jobs"].items()) {
    out += fmt::format("{} ({}): {} waiting, {} in flight\n",
                       keys::is_build_kind(kind) ? "builds" : "jobs", kind,
                       jobs.value("waiting", 0), jobs.value("in_flight", 0));
  }
  const json& failed = s["failed"];
  out += fmt::format("failed after too many deliveries: {}\n", failed.value("count", 0));
  for (const json& f : failed["recent"]) {
    out += fmt::format("  {} ({}): {}\n", f.value("job", "").substr(0, 12), f.value("worker", ""),
                       f.value("reason", ""));
  }
  const json& t = s["throughput"];
  out += fmt::format(
      "results per minute: {:.1f} over the last 5 minutes, {:.1f} over the last {}; {} so far "
      "this minute\n",
      t.value("per_minute_last_5", 0.0), t.value("per_minute_last_15", 0.0), kThroughputMinutes,
      t.value("this_minute", 0));
  return out;
}

}  // namespace cudal1::queue
