#include "cudal1/queue/protocol.hpp"

#include <fmt/format.h>

#include <chrono>

#include "cudal1/queue/keys.hpp"

namespace cudal1::queue {
namespace {

// KEYS: job hash, done key, job stream. ARGV: job id, result stream, payload, submitted_at,
// submitter, keep seconds.
constexpr const char* kSubmit = R"lua(
if redis.call('EXISTS', KEYS[2]) == 1 then return 'answered' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'queued' end
local entry = redis.call('XADD', KEYS[3], '*', 'id', ARGV[1], 'submitter', ARGV[5], 'job', ARGV[3])
redis.call('HSET', KEYS[1], 'entry', entry, 'stream', KEYS[3], 'reply_to', ARGV[2],
           'submitted_at', ARGV[4], 'submitter', ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[6])
return 'added'
)lua";

// KEYS: job hash, done key, job stream, result stream, minute counter, failed stream, failed
// count. ARGV: job id, entry id, group, result, worker, keep seconds, failure reason or ''.
constexpr const char* kPublish = R"lua(
redis.call('XACK', KEYS[3], ARGV[3], ARGV[2])
redis.call('XDEL', KEYS[3], ARGV[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return 'withdrawn' end
if not redis.call('SET', KEYS[2], ARGV[5], 'NX', 'EX', ARGV[6]) then return 'duplicate' end
redis.call('XADD', KEYS[4], '*', 'id', ARGV[1], 'result', ARGV[4])
redis.call('EXPIRE', KEYS[4], ARGV[6])
redis.call('INCR', KEYS[5])
redis.call('EXPIRE', KEYS[5], 7200)
if ARGV[7] ~= '' then
  redis.call('XADD', KEYS[6], 'MAXLEN', '~', '1000', '*', 'id', ARGV[1], 'reason', ARGV[7],
             'worker', ARGV[5])
  redis.call('INCR', KEYS[7])
end
return 'published'
)lua";

// KEYS: job hash, done key, result stream. ARGV: result entry.
// The result stream is never deleted here, even empty: a stream made again starts its entry ids
// afresh, and a result added within the same millisecond as the last one read got an id the
// submitter's XREAD had passed already (seen on 4 workers: one verdict never reached serve). An
// empty stream goes with the EXPIRE each publish sets.
constexpr const char* kCollect = R"lua(
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('XDEL', KEYS[3], ARGV[1])
return 1
)lua";

RedisValue run_script(RedisConnection& redis, const char* script,
                      const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  // EVAL with the source every time: after a Redis restart the script cache is empty, and these
  // scripts are a few hundred bytes next to a job's sources.
  std::vector<std::string> argv = {"EVAL", script, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return redis.command(argv);
}

}  // namespace

SubmitOutcome submit_job(RedisConnection& redis, const Job& job, const std::string& kind) {
  const std::string answer =
      run_script(
          redis, kSubmit, {keys::job(job.id), keys::done(job.id), keys::jobs(kind)},
          {job.id, keys::results(job.submitter), job.to_json().dump(),
           fmt::format("{:.3f}", job.submitted_at), job.submitter, std::to_string(kKeepSeconds)})
          .str();
  if (answer == "answered") return SubmitOutcome::kAnswered;
  if (answer == "queued") return SubmitOutcome::kQueued;
  return SubmitOutcome::kAdded;
}

PublishOutcome publish_result(RedisConnection& redis, const Delivery& delivery,
                              const JobResult& result, const std::string& worker,
                              const std::string& failure) {
  const long long minute = static_cast<long long>(unix_now()) / 60;
  const std::string answer =
      run_script(redis, kPublish,
                 {keys::job(delivery.job_id), keys::done(delivery.job_id), delivery.stream,
                  keys::results(delivery.submitter), keys::finished_in_minute(minute),
                  keys::kFailed, keys::kFailedCount},
                 {delivery.job_id, delivery.entry_id, keys::kGroup,
                  result.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  worker, std::to_string(kKeepSeconds), failure})
          .str();
  if (answer == "published") return PublishOutcome::kPublished;
  if (answer == "duplicate") return PublishOutcome::kDuplicate;
  return PublishOutcome::kWithdrawn;
}

void collect_result(RedisConnection& redis, const std::string& submitter, const std::string& job_id,
                    const std::string& result_entry) {
  run_script(redis, kCollect, {keys::job(job_id), keys::done(job_id), keys::results(submitter)},
             {result_entry});
}

void ensure_group(RedisConnection& redis, const std::string& kind) {
  try {
    redis.command({"XGROUP", "CREATE", keys::jobs(kind), keys::kGroup, "0", "MKSTREAM"});
  } catch (const RedisReplyError& e) {
    if (!e.starts_with("BUSYGROUP")) throw;
  }
}

}  // namespace cudal1::queue
