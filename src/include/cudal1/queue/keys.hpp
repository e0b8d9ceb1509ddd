// Every Redis key the queue uses, in one place (docs/scale-out.md, "Architecture"). One Redis
// database is one queue: use another database number for another kind of GPU.
#pragma once

#include <string>
#include <string_view>

namespace cudal1::queue::keys {

// The consumer group of every job stream: all workers of one kind share its entries.
inline constexpr const char* kGroup = "workers";
// Device kinds, one job stream each, so a CPU worker never takes a GPU job.
inline constexpr const char* kCpu = "cpu";
inline constexpr const char* kCuda = "cuda";

// Build workers (`--role build`) take the build jobs of their build toolchain only, from the
// stream of kind "build-<build_toolchain_id>".
inline constexpr const char* kBuildPrefix = "build-";
std::string build_kind(std::string_view build_toolchain_id);
bool is_build_kind(std::string_view kind);
// A build's packed folder (string, expiring), named by its SHA-256.
std::string artifact(std::string_view digest);

// Stream of jobs not yet finished (entries are deleted once their result is published).
std::string jobs(std::string_view kind);
// Hash of a job that a submitter waits for (entry, stream, reply stream, submitted_at); removed
// when the submitter has collected the result.
std::string job(std::string_view job_id);
// Set, with the worker's name, when the job's one final result was published.
std::string done(std::string_view job_id);
// Stream of a submitter's results, each an entry {id, result}.
std::string results(std::string_view submitter);
// Hash of a live worker (host, devices, current jobs, last beat), expiring without heartbeats.
std::string worker(std::string_view name);
// Sorted set of worker names by the time of their last heartbeat.
inline constexpr const char* kWorkers = "cudal1:workers";
// Stream of the jobs failed after too many deliveries (capped), and their count.
inline constexpr const char* kFailed = "cudal1:failed";
inline constexpr const char* kFailedCount = "cudal1:failed:count";
// Results published during a Unix minute (expiring counters).
std::string finished_in_minute(long long unix_minute);

}  // namespace cudal1::queue::keys
