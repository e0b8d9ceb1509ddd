// The steps of a job's life on Redis, each one atomic (a Lua script) and safe to repeat, so that
// a command sent again after a lost connection changes nothing:
//   submit   the submitter adds the job unless it is queued or answered already;
//   publish  a worker publishes the job's one final result (the first one wins; a late duplicate
//            or a result for a job nobody waits for any more is dropped), acknowledges and
//            deletes the stream entry, and counts it;
//   collect  the submitter, holding the result, deletes it and the job's keys.
#pragma once

#include <string>

#include "cudal1/common/unix_time.hpp"
#include "cudal1/queue/job.hpp"
#include "cudal1/queue/job_result.hpp"
#include "cudal1/queue/redis_connection.hpp"

namespace cudal1::queue {

// Job keys and results nobody collects (a submitter that never came back) expire after a week.
inline constexpr long long kKeepSeconds = 7 * 24 * 3600;

enum class SubmitOutcome {
  kAdded,     // a new stream entry
  kQueued,    // already on the queue (an earlier run of the same submitter added it)
  kAnswered,  // its result is already in the submitter's result stream
};

// Adds `job` to the stream of `kind` (keys::kCpu or keys::kCuda).
SubmitOutcome submit_job(RedisConnection& redis, const Job& job, const std::string& kind);

// One delivery of a job to a worker.
struct Delivery {
  std::string stream;    // keys::jobs(kind)
  std::string entry_id;  // the stream entry
  std::string job_id;
  std::string submitter;
  std::size_t deliveries = 1;  // this one included
};

enum class PublishOutcome {
  kPublished,
  kDuplicate,  // another delivery of the job published first
  kWithdrawn,  // nobody waits for it any more (collected, or expired)
};

// `failure`: non-empty for a job failed after too many deliveries (listed in keys::kFailed).
PublishOutcome publish_result(RedisConnection& redis, const Delivery& delivery,
                              const JobResult& result, const std::string& worker,
                              const std::string& failure = "");

// Deletes a collected result (entry `result_entry` of the submitter's stream) and the job's keys.
void collect_result(RedisConnection& redis, const std::string& submitter, const std::string& job_id,
                    const std::string& result_entry);

// Creates the consumer group of `kind`'s stream (and the stream) unless it exists. Entries added
// before any worker came are delivered too.
void ensure_group(RedisConnection& redis, const std::string& kind);

}  // namespace cudal1::queue
