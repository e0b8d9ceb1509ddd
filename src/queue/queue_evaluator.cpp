#include "cudal1/queue/queue_evaluator.hpp"

#include <fmt/format.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <semaphore>
#include <thread>

#include "cudal1/common/cgroup.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/queue/keys.hpp"
#include "cudal1/queue/protocol.hpp"
#include "cudal1/queue/worker_registry.hpp"

namespace cudal1::queue {
namespace {

using Clock = std::chrono::steady_clock;

// A submitter that cannot reach Redis at start is most likely pointed at the wrong address:
// it says so after this long instead of retrying for ever (later losses are waited out).
constexpr double kFirstConnectS = 10;
// Results read per XREAD, and how long one blocks: short enough that stopping is prompt.
constexpr const char* kReadCount = "100";
constexpr double kReadBlockS = 1.0;

// The job stream for a device request: the worker picks the GPU, so only the kind travels.
std::string kind_of(const std::string& device, const std::function<bool()>& cuda_available) {
  switch (parse_device_request(device, false).kind) {
    case DeviceRequest::Kind::kCpu:
      return keys::kCpu;
    case DeviceRequest::Kind::kAuto:
      return cuda_available() ? keys::kCuda : keys::kCpu;
    case DeviceRequest::Kind::kCuda:
    case DeviceRequest::Kind::kList:
      break;
  }
  return keys::kCuda;
}

}  // namespace

struct QueueEvaluator::State {
  explicit State(QueueSettings s)
      : settings(std::move(s)),
        slots(static_cast<std::ptrdiff_t>(settings.max_in_flight)),
        submit_redis(
            settings.address, {}, [this] { return stopping.load(); }, settings.note) {}

  struct Waiting {
    std::promise<Verdict> promise;
    Job job;
    std::string kind;
  };
  struct Unclaimed {
    std::string entry;
    JobResult result;
  };

  QueueSettings settings;
  EngineConfig config;
  std::atomic<bool> stopping{false};
  std::counting_semaphore<1 << 20> slots;

  std::mutex mutex;  // waiting, unclaimed, occurrences
  std::map<std::string, Waiting> waiting;
  std::map<std::string, Unclaimed> unclaimed;
  std::map<std::string, std::size_t> occurrences;

  std::mutex submit_mutex;  // submit_redis
  RedisConnection submit_redis;

  std::mutex toolchain_mutex;
  std::optional<Toolchain> toolchain;

  std::thread collector;

  void note(const std::string& text) const {
    if (settings.note) settings.note(text);
  }
  Job make_job(const EvalRequest& request, const std::string& kind);
  // Hands a result to whoever waits for it; true when someone did (the caller then collects it).
  bool deliver(const std::string& job_id, const JobResult& result);
  void fail_all(std::exception_ptr error);
  void collect_loop();
  void handle_entry(RedisConnection& redis, const RedisValue& entry);
  // Adds again the jobs still awaited that Redis no longer has.
  void resubmit_lost(RedisConnection& redis);
  // Reads the results of jobs still awaited among the entries up to `last`, the last one read.
  void read_passed(RedisConnection& redis, const std::string& last);
};

Job QueueEvaluator::State::make_job(const EvalRequest& request, const std::string& kind) {
  Job job;
  job.submitter = settings.submitter;
  job.task_path = std::filesystem::absolute(request.task).string();
  job.task_source = read_source_file(request.task, "task");
  job.candidate_path = std::filesystem::absolute(request.candidate).string();
  job.candidate_source = read_source_file(request.candidate, "candidate");
  job.options = request.options;
  job.options.progress = nullptr;
  job.options.device = kind;
  job.submitted_at = unix_now();
  const nlohmann::json options = options_to_json(job.options);
  const std::string first =
      job_id(job.submitter, job.task_source, job.candidate_source, options, 0);
  std::lock_guard<std::mutex> lock(mutex);
  const std::size_t occurrence = occurrences[first]++;
  job.id = occurrence == 0
               ? first
               : job_id(job.submitter, job.task_source, job.candidate_source, options, occurrence);
  return job;
}

bool QueueEvaluator::State::deliver(const std::string& job_id, const JobResult& result) {
  std::promise<Verdict> promise;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = waiting.find(job_id);
    if (it == waiting.end()) return false;
    promise = std::move(it->second.promise);
    waiting.erase(it);
  }
  slots.release();
  try {
    promise.set_value(result.verdict_or_throw());
  } catch (...) {
    promise.set_exception(std::current_exception());
  }
  return true;
}

void QueueEvaluator::State::fail_all(std::exception_ptr error) {
  std::map<std::string, Waiting> abandoned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    abandoned.swap(waiting);
  }
  for (auto& [id, entry] : abandoned) {
    entry.promise.set_exception(error);
    slots.release();
  }
}

void QueueEvaluator::State::handle_entry(RedisConnection& redis, const RedisValue& entry) {
  if (entry.items.size() < 2) return;
  const std::string entry_id = entry.items[0].str();
  const std::string job_id = entry.items[1].field("id");
  std::optional<JobResult> result;
  try {
    result = JobResult::from_json(nlohmann::json::parse(entry.items[1].field("result")));
  } catch (const std::exception& e) {
    note(fmt::format("dropped an unreadable result for job {} ({})", job_id, e.what()));
    collect_result(redis, settings.submitter, job_id, entry_id);
    return;
  }
  if (deliver(job_id, *result)) {
    collect_result(redis, settings.submitter, job_id, entry_id);
    return;
  }
  // Published for an earlier run of this submitter: kept until the same job is asked for.
  std::lock_guard<std::mutex> lock(mutex);
  unclaimed[job_id] = {entry_id, std::move(*result)};
}

void QueueEvaluator::State::resubmit_lost(RedisConnection& redis) {
  std::vector<std::pair<Job, std::string>> awaited;
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [id, entry] : waiting) awaited.emplace_back(entry.job, entry.kind);
  }
  for (const auto& [job, kind] : awaited) {
    if (redis.command({"EXISTS", keys::job(job.id)}).integer != 0) continue;
    {
      // Delivered meanwhile: the job's keys went with its collection.
      std::lock_guard<std::mutex> lock(mutex);
      if (!waiting.contains(job.id)) continue;
    }
    note(
        fmt::format("job {} ({}) is no longer on {} (restarted without its data?): adding it again",
                    job.id, job.candidate_path, settings.address.display()));
    submit_job(redis, job, kind);
  }
}

void QueueEvaluator::State::read_passed(RedisConnection& redis, const std::string& last) {
  // XREAD returns only entries after the last one read; one published with an id not above it
  // (its stream deleted and made again within a millisecond: an expiry, a Redis restart, the
  // collection script of an older cudal1) would wait for ever. What XREAD passed and nobody
  // collected is few entries: results of earlier runs and these.
  const RedisValue entries =
      redis.command({"XRANGE", keys::results(settings.submitter), "-", last});
  for (const RedisValue& entry : entries.items) {
    if (entry.items.size() < 2) continue;
    bool awaited = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      awaited = waiting.contains(entry.items[1].field("id"));
    }
    if (awaited) {
      note(
          fmt::format("job {}: its result (entry {}) was published below the last entry read "
                      "({}) and is read now",
                      entry.items[1].field("id"), entry.items[0].str(), last));
      handle_entry(redis, entry);
    }
  }
}

void QueueEvaluator::State::collect_loop() {
  RedisConnection redis(
      settings.address, {}, [this] { return stopping.load(); }, settings.note);
  const std::string stream = keys::results(settings.submitter);
  // From the start of the stream: results published while this submitter was away come first.
  std::string last = "0";
  auto next_check = Clock::now() + std::chrono::duration<double>(settings.lost_check_s);
  while (!stopping.load()) {
    try {
      const RedisValue reply = redis.command(
          {"XREAD", "COUNT", kReadCount, "BLOCK",
           std::to_string(static_cast<int>(kReadBlockS * 1000)), "STREAMS", stream, last},
          kReadBlockS);
      for (const RedisValue& per_stream : reply.items) {
        if (per_stream.items.size() < 2) continue;
        for (const RedisValue& entry : per_stream.items[1].items) {
          handle_entry(redis, entry);
          last = entry.items.empty() ? last : entry.items[0].str();
        }
      }
      if (Clock::now() >= next_check) {
        resubmit_lost(redis);
        read_passed(redis, last);
        next_check = Clock::now() + std::chrono::duration<double>(settings.lost_check_s);
      }
    } catch (const RedisStopped&) {
      break;
    } catch (...) {
      // A refused password or an unexpected answer: nothing awaited can arrive any more.
      fail_all(std::current_exception());
      break;
    }
  }
}

QueueEvaluator::QueueEvaluator(QueueSettings settings) {
  if (settings.max_in_flight == 0) settings.max_in_flight = kDefaultInFlight;
  if (settings.submitter.empty()) {
    throw std::invalid_argument("QueueEvaluator: the submitter needs a name");
  }
  {
    ReconnectPolicy first;
    first.give_up_after_s = kFirstConnectS;
    RedisConnection probe(settings.address, first);
    try {
      probe.ensure_connected();
      probe.command({"PING"});
    } catch (const RedisUnusable& e) {
      throw InputError(fmt::format("--queue: {}", e.what()));
    }
  }
  state_ = std::make_shared<State>(std::move(settings));
  state_->config = state_->settings.engine;
  if (state_->config.build_jobs == 0) {
    state_->config.build_jobs = usable_cores();
  }
  state_->config.max_in_flight = state_->settings.max_in_flight;
  state_->collector = std::thread([state = state_] { state->collect_loop(); });
}

QueueEvaluator::~QueueEvaluator() {
  state_->stopping.store(true);
  if (state_->collector.joinable()) state_->collector.join();
  state_->fail_all(std::make_exception_ptr(
      std::runtime_error("the evaluation was abandoned: its submitter stopped waiting")));
}

std::future<Verdict> QueueEvaluator::submit(EvalRequest request) {
  State& s = *state_;
  s.slots.acquire();
  std::promise<Verdict> promise;
  std::future<Verdict> future = promise.get_future();
  std::optional<State::Unclaimed> ready;
  Job job;
  std::string kind;
  try {
    kind = kind_of(request.options.device, [this] { return toolchain().cuda_available; });
    job = s.make_job(request, kind);
    std::lock_guard<std::mutex> lock(s.mutex);
    if (const auto it = s.unclaimed.find(job.id); it != s.unclaimed.end()) {
      ready = std::move(it->second);
      s.unclaimed.erase(it);
    }
    s.waiting[job.id] = {std::move(promise), job, kind};
  } catch (...) {
    s.slots.release();
    promise.set_exception(std::current_exception());
    return future;
  }
  if (request.options.progress) {
    request.options.progress(
        fmt::format("queued on {} as job {}", s.settings.address.display(), job.id.substr(0, 12)));
  }
  std::lock_guard<std::mutex> lock(s.submit_mutex);
  try {
    if (ready) {
      s.deliver(job.id, ready->result);
      collect_result(s.submit_redis, s.settings.submitter, job.id, ready->entry);
    } else {
      submit_job(s.submit_redis, job, kind);
    }
  } catch (...) {
    // Not on the queue: the caller learns it through the future, as for any failure.
    std::promise<Verdict> failed;
    {
      std::lock_guard<std::mutex> waiting_lock(s.mutex);
      const auto it = s.waiting.find(job.id);
      if (it == s.waiting.end()) return future;
      failed = std::move(it->second.promise);
      s.waiting.erase(it);
    }
    s.slots.release();
    failed.set_exception(std::current_exception());
  }
  return future;
}

Verdict QueueEvaluator::evaluate(const EvalRequest& request) {
  return submit(request).get();
}

const Toolchain& QueueEvaluator::toolchain() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.toolchain_mutex);
  if (s.toolchain) return *s.toolchain;
  const auto deadline = Clock::now() + std::chrono::duration<double>(s.settings.worker_wait_s);
  bool told = false;
  for (;;) {
    std::vector<WorkerRecord> workers;
    {
      std::lock_guard<std::mutex> redis_lock(s.submit_mutex);
      workers = live_workers(s.submit_redis);
    }
    const WorkerRecord* chosen = nullptr;
    for (const WorkerRecord& worker : workers) {
      // A build worker's toolchain names no device: evaluations say nothing of it.
      if (worker.toolchain.empty() || keys::is_build_kind(worker.kind)) continue;
      if (chosen == nullptr || (worker.kind == keys::kCuda && chosen->kind != keys::kCuda)) {
        chosen = &worker;
      }
    }
    if (chosen != nullptr) {
      s.toolchain = Toolchain::from_info(chosen->toolchain);
      return *s.toolchain;
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(fmt::format(
          "no worker joined {} within {:.0f} s: start one on a GPU host with `cudal1 worker "
          "--queue {}`",
          s.settings.address.display(), s.settings.worker_wait_s, s.settings.address.display()));
    }
    if (!told) {
      s.note(fmt::format("waiting for a worker to join {}", s.settings.address.display()));
      told = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

const EngineConfig& QueueEvaluator::config() const {
  return state_->config;
}

}  // namespace cudal1::queue
