#include "cudal1/queue/queue_builds.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "cudal1/common/sha256.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/build_artifact.hpp"
#include "cudal1/queue/job.hpp"
#include "cudal1/queue/job_result.hpp"
#include "cudal1/queue/keys.hpp"
#include "cudal1/queue/protocol.hpp"
#include "cudal1/queue/worker_registry.hpp"

namespace cudal1::queue {
namespace {

using nlohmann::json;
using BuildClock = std::chrono::steady_clock;

// How long the answer of "is a build worker of this toolchain live?" is reused.
constexpr double kBuilderCheckS = 5;

std::string build_signature(const std::string& secret, const std::string& key,
                            const std::string& digest, bool cacheable,
                            const std::string& record_text) {
  return hmac_sha256_hex(secret,
                         fmt::format("cudal1-build-v1\n{}\n{}\n{}\n{}", key, digest,
                                     cacheable ? "cacheable" : "not cacheable", record_text));
}

}  // namespace

BuildsMode builds_mode_from(const std::string& text) {
  if (text == "here") return BuildsMode::kHere;
  if (text == "queue") return BuildsMode::kQueue;
  if (text == "auto") return BuildsMode::kAuto;
  throw std::invalid_argument(
      fmt::format("'{}': the builds go 'here', to the 'queue' or 'auto'", text));
}

std::string build_secret_from_environment() {
  const char* value = std::getenv(kBuildSecretVariable);
  return value ? value : "";
}

json publish_build(RedisConnection& redis, const std::string& secret, const std::string& key,
                   const BuildRecord& record, bool cacheable, const std::filesystem::path& folder,
                   json details) {
  const PackedFolder packed = pack_folder(folder);
  const std::string digest = sha256_hex(packed.blob);
  redis.command({"SET", keys::artifact(digest), packed.blob, "EX",
                 std::to_string(static_cast<long long>(kArtifactKeepS))});
  const std::string record_text = record.to_json().dump();
  return {{"key", key},
          {"digest", digest},
          {"bytes", packed.blob.size()},
          {"files", packed.files},
          {"cacheable", cacheable},
          {"record", record_text},
          {"signature", build_signature(secret, key, digest, cacheable, record_text)},
          {"details", std::move(details)}};
}

RemoteBuild receive_build(RedisConnection& redis, const std::string& secret, const std::string& key,
                          const json& answer, const std::filesystem::path& folder) {
  std::string digest;
  std::string record_text;
  std::string signature;
  bool cacheable = false;
  try {
    if (answer.at("key").get<std::string>() != key)
      throw std::runtime_error("it answers for another build key");
    digest = answer.at("digest").get<std::string>();
    record_text = answer.at("record").get<std::string>();
    signature = answer.at("signature").get<std::string>();
    cacheable = answer.at("cacheable").get<bool>();
  } catch (const json::exception& e) {
    throw std::runtime_error(fmt::format("an unreadable answer ({})", e.what()));
  }
  if (!equal_in_constant_time(build_signature(secret, key, digest, cacheable, record_text),
                              signature)) {
    throw std::runtime_error(
        "its signature does not match: it was not made by a build worker holding this worker's "
        "build secret");
  }
  const RedisValue blob = redis.command({"GET", keys::artifact(digest)});
  if (blob.is_nil())
    throw std::runtime_error(fmt::format("the packed build {} is gone (expired)", digest));
  if (sha256_hex(blob.str()) != digest)
    throw std::runtime_error(fmt::format("the packed build's SHA-256 is not {}", digest));
  RemoteBuild out;
  out.record = BuildRecord::from_json(json::parse(record_text));
  out.cacheable = cacheable;
  unpack_folder(blob.str(), folder);
  out.details = answer.value("details", json::object());
  out.details["bytes"] = blob.str().size();
  out.details["digest"] = digest;
  return out;
}

struct QueueBuildService::State {
  explicit State(BuildQueueSettings s)
      : settings(std::move(s)),
        redis(
            settings.address, {}, [this] { return stopping.load(); }, settings.log) {}

  BuildQueueSettings settings;
  std::atomic<bool> stopping{false};

  std::mutex mutex;  // waiting, occurrences, builders
  std::map<std::string, std::shared_ptr<std::promise<JobResult>>> waiting;
  std::map<std::string, std::size_t> occurrences;
  std::map<std::string, std::pair<bool, BuildClock::time_point>> builders;  // kind: live, when

  std::mutex redis_mutex;  // redis
  RedisConnection redis;

  std::once_flag collector_started;
  std::thread collector;

  void log(const std::string& line) const {
    if (settings.log) settings.log(line);
  }
  bool builder_live(const std::string& kind);
  void collect_loop();
};

bool QueueBuildService::State::builder_live(const std::string& kind) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = builders.find(kind);
    if (it != builders.end() &&
        BuildClock::now() - it->second.second < std::chrono::duration<double>(kBuilderCheckS))
      return it->second.first;
  }
  std::vector<WorkerRecord> workers;
  {
    std::lock_guard<std::mutex> lock(redis_mutex);
    workers = live_workers(redis);
  }
  bool live = false;
  for (const WorkerRecord& worker : workers) live = live || worker.kind == kind;
  std::lock_guard<std::mutex> lock(mutex);
  builders[kind] = {live, BuildClock::now()};
  return live;
}

void QueueBuildService::State::collect_loop() {
  RedisConnection reader(
      settings.address, {}, [this] { return stopping.load(); }, settings.log);
  const std::string stream = keys::results(settings.submitter);
  std::string last = "0";
  while (!stopping.load()) {
    try {
      const RedisValue reply =
          reader.command({"XREAD", "COUNT", "100", "BLOCK", "1000", "STREAMS", stream, last}, 1.0);
      for (const RedisValue& per_stream : reply.items) {
        if (per_stream.items.size() < 2) continue;
        for (const RedisValue& entry : per_stream.items[1].items) {
          if (entry.items.size() < 2) continue;
          last = entry.items[0].str();
          const std::string job_id = entry.items[1].field("id");
          std::shared_ptr<std::promise<JobResult>> promise;
          {
            std::lock_guard<std::mutex> lock(mutex);
            if (const auto it = waiting.find(job_id); it != waiting.end()) {
              promise = it->second;
              waiting.erase(it);
            }
          }
          // Answers nobody here waits for (an earlier life's, or a withdrawn job's) are dropped.
          if (promise) {
            try {
              promise->set_value(JobResult::from_json(json::parse(entry.items[1].field("result"))));
            } catch (...) {
              promise->set_exception(std::current_exception());
            }
          }
          collect_result(reader, settings.submitter, job_id, last);
        }
      }
    } catch (const RedisStopped&) {
      break;
    } catch (const std::exception& e) {
      log(fmt::format("reading the build answers failed: {}", e.what()));
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }
}

QueueBuildService::QueueBuildService(BuildQueueSettings settings)
    : state_(std::make_shared<State>(std::move(settings))) {
  if (state_->settings.secret.empty())
    throw std::invalid_argument("builds through the queue need the build secret");
}

QueueBuildService::~QueueBuildService() {
  state_->stopping.store(true);
  if (state_->collector.joinable()) state_->collector.join();
}

std::optional<RemoteBuild> QueueBuildService::build(
    const BuildJob& job, const std::filesystem::path& extensions_dir,
    const std::function<void(const std::string&)>& progress) {
  State& s = *state_;
  const std::string kind = keys::build_kind(build_toolchain_id(job.toolchain));
  if (s.settings.mode == BuildsMode::kHere) return std::nullopt;
  if (s.settings.mode == BuildsMode::kAuto && !s.builder_live(kind)) return std::nullopt;
  std::call_once(s.collector_started, [&s, state = state_] {
    s.collector = std::thread([state] { state->collect_loop(); });
  });
  Job queued;
  queued.submitter = s.settings.submitter;
  queued.task_path = job.task_path;
  queued.task_source = job.task_source;
  queued.candidate_path = job.candidate_path;
  queued.candidate_source = job.candidate_source;
  queued.options.limits.build_s = job.build_s;
  queued.submitted_at = unix_now();
  const json build = job.to_json();
  queued.build = {{"key", build["key"]},
                  {"toolchain", build["toolchain"]},
                  {"init_seed", build["init_seed"]},
                  {"build_s", build["build_s"]}};
  const json identity = {{"build", job.key}};
  auto promise = std::make_shared<std::promise<JobResult>>();
  std::future<JobResult> answer = promise->get_future();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    const std::size_t occurrence = s.occurrences[job.key]++;
    queued.id =
        job_id(s.settings.submitter, job.task_source, job.candidate_source, identity, occurrence);
    s.waiting[queued.id] = promise;
  }
  {
    std::lock_guard<std::mutex> lock(s.redis_mutex);
    submit_job(s.redis, queued, kind);
  }
  if (progress) progress(fmt::format("building on the build workers of {}", kind));
  const auto wait = std::chrono::duration<double>(job.build_s + s.settings.queue_wait_s);
  const auto deadline = BuildClock::now() + std::chrono::duration_cast<BuildClock::duration>(wait);
  while (answer.wait_for(std::chrono::milliseconds(500)) != std::future_status::ready) {
    // auto: no build worker of this toolchain left (all stopped or lost) is no reason to wait
    // out the time limit; one that is only slow keeps its job.
    const bool deserted = s.settings.mode == BuildsMode::kAuto && !s.builder_live(kind);
    if (BuildClock::now() < deadline && !s.stopping.load() && !deserted) continue;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.waiting.erase(queued.id);
    }
    {
      // Withdrawn: a build worker that takes it later drops it, one that publishes later is
      // told nobody waits.
      std::lock_guard<std::mutex> lock(s.redis_mutex);
      s.redis.command({"DEL", keys::job(queued.id)});
    }
    s.log(deserted ? fmt::format("no build worker of {} is left: build {} is made here", kind,
                                 job.key.substr(0, 12))
                   : fmt::format("no build worker answered build {} within {:.0f} s: built here",
                                 job.key.substr(0, 12), wait.count()));
    return std::nullopt;
  }
  JobResult result;
  try {
    result = answer.get();
  } catch (const std::exception& e) {
    s.log(fmt::format("build {}: an unreadable answer ({}): built here", job.key.substr(0, 12),
                      e.what()));
    return std::nullopt;
  }
  if (result.build.is_null()) {
    s.log(fmt::format("build worker {} could not build {}: {}; built here", result.worker,
                      job.key.substr(0, 12), result.message));
    return std::nullopt;
  }
  try {
    std::lock_guard<std::mutex> lock(s.redis_mutex);
    RemoteBuild made =
        receive_build(s.redis, s.settings.secret, job.key, result.build, extensions_dir);
    made.details["worker"] = result.worker;
    made.details["deliveries"] = result.deliveries;
    return made;
  } catch (const std::exception& e) {
    s.log(fmt::format("refused the build of {} from worker {}: {}; built here",
                      job.key.substr(0, 12), result.worker, e.what()));
    return std::nullopt;
  }
}

}  // namespace cudal1::queue
