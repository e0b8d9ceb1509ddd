#include "cudal1/queue/queue_worker.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <list>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "cudal1/common/error.hpp"
#include "cudal1/common/process.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/local_evaluator.hpp"
#include "cudal1/eval/remote_builds.hpp"
#include "cudal1/queue/job_files.hpp"
#include "cudal1/queue/keys.hpp"
#include "cudal1/queue/protocol.hpp"
#include "cudal1/queue/worker_registry.hpp"

namespace cudal1::queue {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// XREADGROUP blocks this long when the queue is empty: finished jobs wait at most this long to
// be published, and a stop request is seen within it.
constexpr int kReadBlockMs = 500;
// Checking for finished evaluations while every slot is busy.
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// Heartbeats: at most this far apart, and three per visibility timeout, so that a live worker's
// leases never lapse between two renewals.
constexpr double kMaxBeatS = 5;
// A worker's record outlives a few missed beats (a pause of the host, a slow Redis).
constexpr double kRecordBeats = 3;

std::string short_id(const std::string& id) {
  return id.substr(0, 12);
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace

struct QueueWorker::State {
  explicit State(WorkerSettings s)
      : settings(std::move(s)),
        kind(settings.devices.size() == 1 && settings.devices[0] == "cpu" ? keys::kCpu
                                                                          : keys::kCuda),
        stream(keys::jobs(kind)),
        host(host_name()),
        engine(engine_config(settings)),
        beat_s(std::min(kMaxBeatS, settings.visibility_s / 3)) {}

  static EngineConfig engine_config(const WorkerSettings& settings) {
    EngineConfig config = settings.engine;
    config.build_jobs = std::max(1u, settings.jobs);
    config.max_in_flight = config.build_jobs;
    if (!settings.build_role && settings.builds != BuildsMode::kHere &&
        !settings.build_secret.empty()) {
      BuildQueueSettings builds;
      builds.address = settings.address;
      builds.submitter = "builds:" + settings.name;
      builds.secret = settings.build_secret;
      builds.mode = settings.builds;
      builds.log = settings.log;
      config.remote_builds = std::make_shared<QueueBuildService>(std::move(builds));
    }
    return config;
  }

  struct Running {
    Delivery delivery;
    Job job;  // sources dropped once written
    std::string device;
    Clock::time_point started;
    double started_at = 0;
    std::unique_ptr<JobFiles> files;
    std::future<Verdict> future;
    // A build job's (build role): the build, and the key it is for.
    std::future<LocalEvaluator::HostBuild> build;
    std::string build_key;
    bool ready() const {
      const auto now = std::chrono::seconds(0);
      return build.valid() ? build.wait_for(now) == std::future_status::ready
                           : future.wait_for(now) == std::future_status::ready;
    }
  };

  WorkerSettings settings;
  std::string kind;
  std::string stream;
  std::string host;
  LocalEvaluator engine;
  double beat_s;
  double started_at = unix_now();
  json toolchain;

  std::mutex mutex;  // running, device_names, finished
  std::list<Running> running;
  std::map<std::string, std::string> device_names;
  std::size_t finished = 0;
  std::set<std::string> lost_leases;  // entries another worker claimed (reported once)

  void log(const std::string& line) const {
    if (settings.log) settings.log(line);
  }
  double ttl_s() const { return std::max(kRecordBeats * beat_s, settings.visibility_s); }
  WorkerRecord record();
  void check_name(RedisConnection& redis);
  void heartbeat_loop(const std::atomic<bool>& stop);
  void renew_leases(RedisConnection& redis);

  std::size_t deliveries_of(RedisConnection& redis, const std::string& entry_id);
  void take_new(RedisConnection& redis, std::size_t free);
  void claim_stale(RedisConnection& redis, std::size_t free);
  void claim_own_leftovers(RedisConnection& redis);
  void start(RedisConnection& redis, const RedisValue& entry, std::size_t deliveries);
  void fail_poisoned(RedisConnection& redis, const Delivery& delivery);
  void finish_ready(RedisConnection& redis);
  void finish(RedisConnection& redis, Running& job);
  void finish_build(RedisConnection& redis, Running& job);
  // Publishes what settle(job id) gives ({result, what for the log}), or the error it throws
  // (an InputError as `unusable` input), with the job's time.
  template <typename Settle>
  void conclude(RedisConnection& redis, Running& job, const char* unusable, Settle settle);
  // A build job taken (build role): the build starts on a thread of its own.
  void start_build(RedisConnection& redis, Running job);
  void publish(RedisConnection& redis, const Delivery& delivery, JobResult result,
               const std::string& what, const std::string& failure = "");
};

WorkerRecord QueueWorker::State::record() {
  WorkerRecord r;
  r.name = settings.name;
  r.host = host;
  r.pid = ::getpid();
  r.kind = kind;
  r.toolchain = toolchain;
  r.capacity = std::max(1u, settings.jobs);
  r.started_at = started_at;
  r.last_beat = unix_now();
  std::lock_guard<std::mutex> lock(mutex);
  for (const std::string& device : settings.devices) {
    json entry = {{"device", device}};
    if (const auto name = device_names.find(device); name != device_names.end()) {
      entry["name"] = name->second;
    }
    r.devices.push_back(entry);
  }
  for (const Running& job : running) {
    r.jobs.push_back({{"id", job.delivery.job_id},
                      {"submitter", job.delivery.submitter},
                      {"task", file_name(job.job.task_path)},
                      {"candidate", file_name(job.job.candidate_path)},
                      {"device", job.device},
                      {"deliveries", job.delivery.deliveries},
                      {"started_at", job.started_at}});
  }
  r.finished = finished;
  return r;
}

void QueueWorker::State::check_name(RedisConnection& redis) {
  const auto other = find_worker(redis, settings.name);
  if (!other) return;
  // A predecessor on this host whose process is gone (a restart after a crash) left its record
  // behind: its name, and the jobs it held, are taken over at once.
  const bool gone_here =
      other->host == host && (other->pid == ::getpid() ||
                              (::kill(static_cast<pid_t>(other->pid), 0) != 0 && errno == ESRCH));
  if (!gone_here && unix_now() - other->last_beat < ttl_s()) {
    throw InputError(fmt::format(
        "a worker named '{}' is alive on {} (pid {}, last beat {:.0f} s ago): give this one "
        "another --name",
        settings.name, other->host, other->pid, unix_now() - other->last_beat));
  }
}

void QueueWorker::State::renew_leases(RedisConnection& redis) {
  std::vector<std::string> held;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const Running& job : running) held.push_back(job.delivery.entry_id);
  }
  if (held.empty()) return;
  // Only entries still assigned to this worker: a lease another worker took over (this one was
  // presumed dead) is not taken back.
  const RedisValue pending = redis.command({"XPENDING", stream, keys::kGroup, "-", "+",
                                            std::to_string(held.size() * 4 + 16), settings.name});
  std::set<std::string> owned;
  for (const RedisValue& item : pending.items) {
    if (!item.items.empty()) owned.insert(item.items[0].str());
  }
  std::vector<std::string> argv = {"XCLAIM", stream, keys::kGroup, settings.name, "0"};
  for (const std::string& id : held) {
    if (owned.contains(id)) {
      argv.push_back(id);
    } else if (lost_leases.insert(id).second) {
      log(
          fmt::format("the lease of entry {} went to another worker: this one's result will be "
                      "dropped if that one publishes first",
                      id));
    }
  }
  // JUSTID: the idle time is reset without counting another delivery.
  argv.push_back("JUSTID");
  if (argv.size() > 6) redis.command(argv);
}

void QueueWorker::State::heartbeat_loop(const std::atomic<bool>& stop) {
  RedisConnection redis(
      settings.address, {}, [&stop] { return stop.load(); }, settings.log);
  while (!stop.load()) {
    try {
      beat(redis, record(), ttl_s());
      renew_leases(redis);
    } catch (const RedisStopped&) {
      return;
    } catch (const std::exception& e) {
      log(fmt::format("heartbeat failed: {}", e.what()));
    }
    const auto until = Clock::now() + std::chrono::duration<double>(beat_s);
    while (!stop.load() && Clock::now() < until) std::this_thread::sleep_for(kPollInterval);
  }
}

std::size_t QueueWorker::State::deliveries_of(RedisConnection& redis, const std::string& entry_id) {
  const RedisValue pending =
      redis.command({"XPENDING", stream, keys::kGroup, entry_id, entry_id, "1"});
  if (pending.items.empty() || pending.items[0].items.size() < 4) return 1;
  return static_cast<std::size_t>(std::max(1LL, pending.items[0].items[3].integer));
}

void QueueWorker::State::take_new(RedisConnection& redis, std::size_t free) {
  const RedisValue reply = redis.command(
      {"XREADGROUP", "GROUP", keys::kGroup, settings.name, "COUNT", std::to_string(free), "BLOCK",
       std::to_string(kReadBlockMs), "STREAMS", stream, ">"},
      kReadBlockMs / 1000.0);
  for (const RedisValue& per_stream : reply.items) {
    if (per_stream.items.size() < 2) continue;
    for (const RedisValue& entry : per_stream.items[1].items) start(redis, entry, 1);
  }
}

void QueueWorker::State::claim_stale(RedisConnection& redis, std::size_t free) {
  const auto idle_ms = static_cast<long long>(std::ceil(settings.visibility_s * 1000));
  const RedisValue reply =
      redis.command({"XAUTOCLAIM", stream, keys::kGroup, settings.name, std::to_string(idle_ms),
                     "0-0", "COUNT", std::to_string(free)});
  if (reply.items.size() < 2) return;
  for (const RedisValue& entry : reply.items[1].items) {
    // Entries deleted meanwhile come back as nil (Redis 6.2) or in the third element (7.0).
    if (entry.items.size() < 2) continue;
    const std::string entry_id = entry.items[0].str();
    start(redis, entry, deliveries_of(redis, entry_id));
  }
}

// Entries this name held in an earlier life (a worker restarted under the same name): their
// evaluations died with it, so they are taken again now rather than after the timeout.
void QueueWorker::State::claim_own_leftovers(RedisConnection& redis) {
  const RedisValue pending =
      redis.command({"XPENDING", stream, keys::kGroup, "-", "+", "1000", settings.name});
  std::vector<std::string> argv = {"XCLAIM", stream, keys::kGroup, settings.name, "0"};
  for (const RedisValue& item : pending.items) {
    if (!item.items.empty()) argv.push_back(item.items[0].str());
  }
  if (argv.size() == 5) return;
  const RedisValue claimed = redis.command(argv);
  for (const RedisValue& entry : claimed.items) {
    if (entry.items.size() < 2) continue;
    start(redis, entry, deliveries_of(redis, entry.items[0].str()));
  }
}

void QueueWorker::State::publish(RedisConnection& redis, const Delivery& delivery, JobResult result,
                                 const std::string& what, const std::string& failure) {
  result.worker = settings.name;
  result.deliveries = delivery.deliveries;
  const PublishOutcome outcome = publish_result(redis, delivery, result, settings.name, failure);
  std::string ending;
  if (outcome == PublishOutcome::kPublished) {
    std::lock_guard<std::mutex> lock(mutex);
    ++finished;
  } else {
    ending = outcome == PublishOutcome::kDuplicate
                 ? " (dropped: another delivery of the job published first)"
                 : " (dropped: nobody waits for this job any more)";
  }
  log(fmt::format("job {}: {}{}", short_id(delivery.job_id), what, ending));
}

void QueueWorker::State::fail_poisoned(RedisConnection& redis, const Delivery& delivery) {
  const std::string reason = fmt::format(
      "the job was delivered {} times and every worker that took it stopped before publishing "
      "a result (killed, its host lost, or killed by the candidate itself); failed instead of "
      "retried (--max-deliveries {})",
      delivery.deliveries - 1, settings.max_deliveries);
  Verdict verdict;
  verdict.status = Status::kRuntimeError;
  verdict.error = reason;
  verdict.details["queue"] = {
      {"job", delivery.job_id}, {"worker", settings.name}, {"deliveries", delivery.deliveries - 1}};
  verdict.finalize();
  publish(redis, delivery, JobResult::of_verdict(delivery.job_id, std::move(verdict)),
          "failed after too many deliveries", reason);
}

void QueueWorker::State::start(RedisConnection& redis, const RedisValue& entry,
                               std::size_t deliveries) {
  const RedisValue& fields = entry.items[1];
  Delivery delivery{stream, entry.items[0].str(), fields.field("id"), fields.field("submitter"),
                    deliveries};
  if (delivery.job_id.empty() || delivery.submitter.empty()) {
    log(fmt::format("entry {} is not a cudal1 job: removed", delivery.entry_id));
    redis.command({"XACK", stream, keys::kGroup, delivery.entry_id});
    redis.command({"XDEL", stream, delivery.entry_id});
    return;
  }
  if (deliveries > settings.max_deliveries) {
    fail_poisoned(redis, delivery);
    return;
  }
  // Answered or withdrawn already: publishing drops the result and removes the entry, so an
  // empty one is published without evaluating anything.
  if (redis.command({"EXISTS", keys::done(delivery.job_id)}).integer != 0 ||
      redis.command({"EXISTS", keys::job(delivery.job_id)}).integer == 0) {
    publish(redis, delivery, JobResult::of_internal_error(delivery.job_id, "not evaluated"),
            "already answered or withdrawn");
    return;
  }
  Running job;
  job.delivery = delivery;
  try {
    job.job = Job::from_json(json::parse(fields.field("job")));
  } catch (const std::exception& e) {
    publish(redis, delivery,
            JobResult::of_internal_error(delivery.job_id,
                                         fmt::format("the job cannot be read: {}", e.what())),
            "unreadable job");
    return;
  }
  EvalRequest request;
  try {
    job.files = std::make_unique<JobFiles>(settings.engine.cache_dir / "queue-jobs", job.job,
                                           delivery.entry_id);
  } catch (const std::exception& e) {
    publish(redis, delivery,
            JobResult::of_internal_error(
                delivery.job_id,
                fmt::format("worker {} cannot write the job's files: {}", settings.name, e.what())),
            "cannot write the job's files");
    return;
  }
  if (job.job.options.keep_workdir) job.files->keep();
  if (settings.build_role) {
    start_build(redis, std::move(job));
    return;
  }
  request.task = job.files->task();
  request.candidate = job.files->candidate();
  request.options = job.job.options;
  job.job.task_source.clear();
  job.job.candidate_source.clear();
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::vector<std::string> busy;
    for (const Running& other : running) busy.push_back(other.device);
    job.device = kind == keys::kCpu ? "cpu" : least_loaded(settings.devices, busy);
  }
  request.options.device = job.device;
  job.started = Clock::now();
  job.started_at = unix_now();
  job.future = engine.submit(std::move(request));
  log(fmt::format("job {}: {} against {} from {} on {}{}", short_id(delivery.job_id),
                  file_name(job.job.candidate_path), file_name(job.job.task_path),
                  delivery.submitter, job.device,
                  deliveries > 1 ? fmt::format(" (delivery {})", deliveries) : ""));
  std::lock_guard<std::mutex> lock(mutex);
  running.push_back(std::move(job));
}

void QueueWorker::State::start_build(RedisConnection& redis, Running job) {
  BuildJob build;
  try {
    if (job.job.build.is_null()) throw std::runtime_error("it is an evaluation, not a build");
    json fields = job.job.build;
    fields["task_path"] = job.job.task_path;
    fields["task_source"] = job.job.task_source;
    fields["candidate_path"] = job.job.candidate_path;
    fields["candidate_source"] = job.job.candidate_source;
    build = BuildJob::from_json(fields);
  } catch (const std::exception& e) {
    publish(redis, job.delivery,
            JobResult::of_internal_error(job.delivery.job_id,
                                         fmt::format("the build job cannot be read: {}", e.what())),
            "unreadable build job");
    return;
  }
  job.job.task_source.clear();
  job.job.candidate_source.clear();
  job.build_key = build.key;
  job.device = "build";
  job.started = Clock::now();
  job.started_at = unix_now();
  job.build =
      std::async(std::launch::async, [this, build = std::move(build), task = job.files->task(),
                                      candidate = job.files->candidate()] {
        return engine.build_for_host(build, task, candidate);
      });
  log(fmt::format(
      "job {}: building {} ({}) for {}{}", short_id(job.delivery.job_id),
      file_name(job.job.candidate_path), job.build_key.substr(0, 12), job.delivery.submitter,
      job.delivery.deliveries > 1 ? fmt::format(" (delivery {})", job.delivery.deliveries) : ""));
  std::lock_guard<std::mutex> lock(mutex);
  running.push_back(std::move(job));
}

template <typename Settle>
void QueueWorker::State::conclude(RedisConnection& redis, Running& job, const char* unusable,
                                  Settle settle) {
  const std::string& id = job.delivery.job_id;
  JobResult result;
  std::string what;
  try {
    std::tie(result, what) = settle(id);
  } catch (const InputError& e) {
    // A build names why this host cannot make it (another toolchain, no sandbox).
    what = job.build_key.empty() ? unusable : fmt::format("{}: {}", unusable, e.what());
    result =
        JobResult::of_input_error(id, InputError(job.files->as_submitted(e.what()), e.subject()));
  } catch (const std::exception& e) {
    what = fmt::format("internal error: {}", e.what());
    result = JobResult::of_internal_error(id, job.files->as_submitted(e.what()));
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - job.started).count();
  publish(redis, job.delivery, std::move(result), fmt::format("{} ({:.1f} s)", what, seconds));
}

void QueueWorker::State::finish_build(RedisConnection& redis, Running& job) {
  conclude(redis, job, "cannot build it here", [&](const std::string& id) {
    LocalEvaluator::HostBuild made = job.build.get();
    made.record.error = job.files->as_submitted(made.record.error);
    made.record.log = job.files->as_submitted(made.record.log);
    const json details = {{"worker", settings.name},
                          {"host", host},
                          {"cached", made.cached},
                          {"seconds", made.record.seconds},
                          {"cpu_s", made.cpu_s}};
    json answer = publish_build(redis, settings.build_secret, job.build_key, made.record,
                                made.cacheable, made.folder, details);
    std::string what = fmt::format(
        "{} ({} files, {:.1f} MB{})", made.record.ok ? "built" : "build failed",
        answer.value("files", 0), answer.value("bytes", 0.0) / 1e6, made.cached ? ", cached" : "");
    return std::make_pair(JobResult::of_build(id, std::move(answer)), std::move(what));
  });
}

void QueueWorker::State::finish(RedisConnection& redis, Running& job) {
  if (job.build.valid()) {
    finish_build(redis, job);
    return;
  }
  conclude(redis, job, "unusable input", [&](const std::string& id) {
    Verdict verdict = job.future.get();
    verdict.log = job.files->as_submitted(verdict.log);
    verdict.error = job.files->as_submitted(verdict.error);
    verdict.details["queue"] = {{"job", id},
                                {"worker", settings.name},
                                {"host", host},
                                {"deliveries", job.delivery.deliveries}};
    if (verdict.device.is_object() && verdict.device.contains("name")) {
      std::lock_guard<std::mutex> lock(mutex);
      device_names[job.device] = verdict.device["name"].get<std::string>();
    }
    std::string what = verdict.summary_line();
    return std::make_pair(JobResult::of_verdict(id, std::move(verdict)), std::move(what));
  });
}

void QueueWorker::State::finish_ready(RedisConnection& redis) {
  for (;;) {
    std::list<Running> done;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto it = running.begin(); it != running.end(); ++it) {
        if (it->ready()) {
          done.splice(done.end(), running, it);
          break;
        }
      }
    }
    if (done.empty()) return;
    // Published outside the lock; the heartbeat no longer lists it, nor renews its lease, so a
    // publish that waits for a lost Redis may see it claimed by another worker: the first
    // published result wins either way.
    finish(redis, done.front());
  }
}

QueueWorker::QueueWorker(WorkerSettings settings)
    : state_(std::make_unique<State>(std::move(settings))) {}

QueueWorker::~QueueWorker() = default;

void QueueWorker::run(const std::atomic<bool>& stop) {
  State& s = *state_;
  const Toolchain& toolchain = s.engine.toolchain();
  if (s.settings.build_role) {
    s.kind = keys::build_kind(build_toolchain_id(toolchain.info));
    s.stream = keys::jobs(s.kind);
  } else if (s.kind == keys::kCuda && !toolchain.cuda_available) {
    throw InputError(fmt::format("--device {}: PyTorch ({}) sees no CUDA device here",
                                 s.settings.devices.front(), toolchain.info.value("torch", "?")));
  }
  s.toolchain = toolchain.info;
  // A worker told to stop still publishes what it holds, waiting for Redis if need be; holding
  // nothing, it stops waiting for a Redis that is gone.
  RedisConnection redis(
      s.settings.address, {}, [&stop, &s] { return stop.load() && s.running.empty(); },
      s.settings.log);
  std::atomic<bool> heartbeat_stop{false};
  ensure_group(redis, s.kind);
  s.check_name(redis);
  beat(redis, s.record(), s.ttl_s());
  std::string builds;
  if (s.settings.build_role) {
    builds = fmt::format("; builds for the build toolchain {}", s.kind);
  } else if (s.engine.config().remote_builds) {
    builds = fmt::format("; candidates built by the build workers of {}{}",
                         keys::build_kind(build_toolchain_id(toolchain.info)),
                         s.settings.builds == BuildsMode::kAuto ? " while one is live" : "");
  } else if (s.settings.builds != BuildsMode::kHere) {
    builds = fmt::format("; candidates built here (${} is not set)", kBuildSecretVariable);
  }
  s.log(fmt::format("joined {} as '{}' on {}: {} job(s) at once on {}, visibility timeout {} s{}",
                    s.settings.address.display(), s.settings.name, s.host,
                    std::max(1u, s.settings.jobs), fmt::join(s.settings.devices, ","),
                    s.settings.visibility_s, builds));
  std::thread heartbeat([&s, &heartbeat_stop] { s.heartbeat_loop(heartbeat_stop); });
  const std::size_t capacity = std::max(1u, s.settings.jobs);
  const auto reclaim_every =
      std::chrono::duration<double>(std::max(0.5, s.settings.visibility_s / 2));
  auto next_reclaim = Clock::now();
  std::exception_ptr failure;
  try {
    s.claim_own_leftovers(redis);
    while (!stop.load() || !s.running.empty()) {
      s.finish_ready(redis);
      std::size_t free = 0;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        free = stop.load() ? 0 : capacity - std::min(capacity, s.running.size());
      }
      if (free == 0) {
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      try {
        if (Clock::now() >= next_reclaim) {
          s.claim_stale(redis, free);
          next_reclaim = Clock::now() + std::chrono::duration_cast<Clock::duration>(reclaim_every);
          continue;
        }
        s.take_new(redis, free);
      } catch (const RedisReplyError& e) {
        // The stream or its group is gone (Redis restarted without its data): made again.
        if (!e.starts_with("NOGROUP")) throw;
        s.log(fmt::format("the group of {} is gone: creating it again", s.stream));
        ensure_group(redis, s.kind);
      }
    }
  } catch (const RedisStopped&) {
    s.log("stopped while Redis could not be reached");
  } catch (...) {
    failure = std::current_exception();
  }
  heartbeat_stop.store(true);
  heartbeat.join();
  if (failure) std::rethrow_exception(failure);
  try {
    leave(redis, s.settings.name);
    s.log("left the queue");
  } catch (const RedisStopped&) {
    // Its record expires by itself.
  }
}

}  // namespace cudal1::queue
