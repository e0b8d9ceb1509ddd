#include "cudal1/serve/reward_service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "cudal1/bench/devices.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "cudal1/search/optimize_settings.hpp"
#include "cudal1/serve/completion.hpp"

namespace cudal1::serve {
namespace {

// What an item needs of a verdict.
struct Evaluated {
  std::optional<std::int64_t> candidate_id;
  std::string status;
  std::optional<double> speedup;
  std::vector<std::string> flags;
  double verdict_reward = 0;
  std::string error;
  bool cached = false;
};

Evaluated evaluated_from(const store::VerdictRecord& record, bool cached) {
  Evaluated e;
  e.candidate_id = record.candidate_id;
  e.status = record.status;
  e.speedup = record.speedup;
  e.verdict_reward = record.reward;
  e.flags = record.verdict.value("flags", std::vector<std::string>{});
  e.error = record.verdict.value("error", "");
  e.cached = cached;
  return e;
}

// Seconds a verdict used its device: alone while timed (phases.device_held = [from, to], Unix
// seconds) plus its first calls and correctness trials (phases.device_shared, one [from, to]
// per hold), which may have shared the device with other evaluations' trials and so count in
// full here: an upper bound on its cost.
double device_seconds(const nlohmann::json& verdict) {
  const auto phases = verdict.value("phases", nlohmann::json::object());
  const auto span_seconds = [](const nlohmann::json& span) {
    if (span.is_array() && span.size() == 2 && span[0].is_number() && span[1].is_number())
      return span[1].get<double>() - span[0].get<double>();
    return 0.0;
  };
  double seconds = span_seconds(phases.value("device_held", nlohmann::json()));
  for (const auto& span : phases.value("device_shared", nlohmann::json::array()))
    seconds += span_seconds(span);
  return seconds;
}

}  // namespace

struct RewardService::State {
  Evaluator& evaluator;
  store::Store& store;
  const TaskCatalog& catalog;
  RewardServiceOptions options;
  Metrics& metrics;

  // The store's run that holds this server's candidates of each task (one per task, device kind
  // and tolerance, so a restarted server finds the verdicts it recorded).
  std::mutex runs_mutex;
  std::map<std::string, std::int64_t> runs;

  // Evaluations in flight, by (run, SHA-256 of the code): identical code waits for one.
  std::mutex flights_mutex;
  std::map<std::pair<std::int64_t, std::string>, std::shared_future<Evaluated>> flights;

  // The evaluation slots: max_in_flight threads taking jobs in order.
  std::mutex jobs_mutex;
  std::condition_variable jobs_ready;
  std::deque<std::function<void()>> jobs;
  std::size_t running = 0;
  bool stopping = false;
  std::vector<std::thread> slots;
  bench::DeviceLoad devices;  // evaluations in flight per device

  // Smoothing: one history per task, added to in the order rewards are given.
  std::mutex smoothing_mutex;
  rl::RewardSmoother smoother;
  std::set<std::string> restored;

  State(Evaluator& e, store::Store& s, const TaskCatalog& c, RewardServiceOptions o, Metrics& m)
      : evaluator(e),
        store(s),
        catalog(c),
        options(std::move(o)),
        metrics(m),
        devices(options.devices),
        smoother(options.policy.window, options.policy.clip) {
    const std::size_t count = std::max<std::size_t>(1, options.max_in_flight);
    for (std::size_t i = 0; i < count; ++i) slots.emplace_back([this] { take_jobs(); });
  }

  ~State() {
    {
      std::lock_guard lock(jobs_mutex);
      stopping = true;
    }
    jobs_ready.notify_all();
    for (auto& slot : slots) slot.join();
  }

  void take_jobs() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(jobs_mutex);
        jobs_ready.wait(lock, [this] { return stopping || !jobs.empty(); });
        // Jobs queued before the end still run: their requests are waiting for them.
        if (jobs.empty()) return;
        job = std::move(jobs.front());
        jobs.pop_front();
        ++running;
      }
      job();
      std::lock_guard lock(jobs_mutex);
      --running;
    }
  }

  void enqueue(std::function<void()> job) {
    {
      std::lock_guard lock(jobs_mutex);
      jobs.push_back(std::move(job));
    }
    jobs_ready.notify_one();
  }

  std::int64_t run_for(const CatalogTask& task);
  std::pair<std::shared_future<Evaluated>, bool> evaluation_for(const CatalogTask& task,
                                                                const std::string& code,
                                                                const std::string& analysis);
  Evaluated evaluate(const CatalogTask& task, std::int64_t candidate_id,
                     const std::filesystem::path& file);
  void add_hack_case(const CatalogTask& task, std::int64_t candidate_id,
                     const std::filesystem::path& file, const Verdict& verdict);
  void smooth(std::vector<RewardResult>& results, const std::vector<RewardItem>& items,
              const std::string& request_id, std::optional<std::int64_t> step);
};

std::int64_t RewardService::State::run_for(const CatalogTask& task) {
  std::lock_guard lock(runs_mutex);
  if (const auto it = runs.find(task.key); it != runs.end()) return it->second;
  const std::string kind = device_kind(options.devices.front());
  const nlohmann::json tolerance = options.eval.tolerance.to_json();
  for (const auto& run : store.runs()) {
    if (run.llm == "serve" && run.task_id == task.task_id &&
        run.options.value("device", "") == kind &&
        run.options.value("tolerance", nlohmann::json()) == tolerance) {
      return runs[task.key] = run.id;
    }
  }
  store::RunRecord run;
  run.task_id = task.task_id;
  run.model = "trainer";
  run.llm = "serve";
  run.options = {{"serve", true},
                 {"stage", search::kStageRl},
                 {"task_key", task.key},
                 {"device", kind},
                 {"tolerance", tolerance}};
  run.created_at = store::now_iso8601();
  return runs[task.key] = store.create_run(run);
}

std::pair<std::shared_future<Evaluated>, bool> RewardService::State::evaluation_for(
    const CatalogTask& task, const std::string& code, const std::string& analysis) {
  const std::int64_t run = run_for(task);
  const std::string sha = sha256_hex(code);
  const auto key = std::make_pair(run, sha);
  auto promise = std::make_shared<std::promise<Evaluated>>();
  std::shared_future<Evaluated> future = promise->get_future().share();
  {
    // Checked under the lock together, so that two requests never both evaluate the same code.
    std::lock_guard lock(flights_mutex);
    if (const auto it = flights.find(key); it != flights.end()) return {it->second, false};
    if (const auto earlier = store.verdict_for_source(run, sha)) {
      promise->set_value(evaluated_from(*earlier, true));
      return {future, true};
    }
    flights.emplace(key, future);
  }
  try {
    store::CandidateRecord candidate;
    candidate.run_id = run;
    candidate.kind = "generated";
    candidate.source = code;
    candidate.source_sha256 = sha;
    candidate.analysis = analysis;
    const std::int64_t id = store.add_candidate(candidate);
    const auto file = options.work_dir / "candidates" / fmt::format("candidate_{}.py", id);
    std::filesystem::create_directories(file.parent_path());
    write_file_atomic(file, code);
    enqueue([this, &task, id, file, promise, key] {
      Evaluated result = evaluate(task, id, file);
      std::lock_guard lock(flights_mutex);
      promise->set_value(std::move(result));
      flights.erase(key);
    });
  } catch (...) {
    std::lock_guard lock(flights_mutex);
    promise->set_exception(std::current_exception());
    flights.erase(key);
  }
  return {future, true};
}

Evaluated RewardService::State::evaluate(const CatalogTask& task, std::int64_t candidate_id,
                                         const std::filesystem::path& file) {
  const bench::DeviceLoad::Lease lease(devices);
  const std::string& device = lease.device();
  try {
    EvalRequest request{task.snapshot, file, options.eval};
    request.options.device = device;
    request.options.progress = nullptr;
    Verdict verdict;
    try {
      verdict = evaluator.evaluate(request);
    } catch (const InputError& e) {
      if (e.subject() != InputError::Subject::kCandidate) throw;
      verdict = unusable_candidate_verdict(e.what());
    }
    const store::VerdictRecord record = store::verdict_record_of(candidate_id, verdict);
    store.record_verdict(record);
    metrics.count_evaluation(record.status);
    metrics.add_device_seconds(device, device_seconds(record.verdict));
    if (verdict.status == Status::kRejected) add_hack_case(task, candidate_id, file, verdict);
    return evaluated_from(record, false);
  } catch (const std::exception& e) {
    // The engine itself failed (not the candidate): nothing is recorded, so the same code is
    // evaluated again when it comes back; this item gets the failure reward.
    spdlog::error("cudal1 serve: evaluating candidate {} of {} failed: {}", candidate_id, task.key,
                  e.what());
    metrics.count_evaluation("internal_error");
    Evaluated failed;
    failed.candidate_id = candidate_id;
    failed.status = "runtime_error";
    failed.error = fmt::format("cudal1 internal error (not the candidate's): {}", e.what());
    return failed;
  }
}

void RewardService::State::add_hack_case(const CatalogTask& task, std::int64_t candidate_id,
                                         const std::filesystem::path& file,
                                         const Verdict& verdict) {
  if (options.hacks_dir.empty()) return;
  const auto reject = std::find_if(verdict.flags.begin(), verdict.flags.end(),
                                   [](const std::string& name) { return is_reject_flag(name); });
  if (reject == verdict.flags.end()) return;
  review::NewHackCase request;
  request.file = file;
  request.hack_class = *reject;
  request.name = fmt::format("serve-{}-{}", task.name, candidate_id);
  request.description = fmt::format("rejected by cudal1 serve (flags {}): {}",
                                    fmt::join(verdict.flags, ","), verdict.error);
  request.task = task.key;
  try {
    std::vector<std::string> warnings;
    review::HackCorpus::add(options.hacks_dir, request, warnings);
  } catch (const std::exception& e) {
    // Content already in the corpus is the common case: the same hack comes back.
    spdlog::debug("cudal1 serve: candidate {} not added to {}: {}", candidate_id,
                  options.hacks_dir.string(), e.what());
  }
}

void RewardService::State::smooth(std::vector<RewardResult>& results,
                                  const std::vector<RewardItem>& items,
                                  const std::string& request_id, std::optional<std::int64_t> step) {
  std::vector<store::RewardRecord> records;
  std::vector<double> rewards;
  std::vector<std::optional<std::string>> groups;
  // Held while the rewards are recorded too: the store's order is the order of the histories.
  std::lock_guard lock(smoothing_mutex);
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    if (restored.insert(r.task).second) {
      smoother.restore(r.task, store.recent_raw_rewards(r.task, options.policy.window));
    }
    r.reward = smoother.add(r.task, r.raw_reward);
    rewards.push_back(r.reward);
    groups.push_back(items[i].group);
  }
  const auto advantages = rl::group_advantages(rewards, groups, options.policy.advantage_epsilon);
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    r.advantage = advantages[i];
    store::RewardRecord record;
    record.task_key = r.task;
    record.candidate_id = r.candidate_id;
    record.request_id = request_id;
    record.step = step;
    record.group = items[i].group;
    record.status = r.status;
    record.raw_reward = r.raw_reward;
    record.reward = r.reward;
    record.advantage = r.advantage;
    records.push_back(std::move(record));
  }
  store.record_rewards(records);
}

RewardService::RewardService(Evaluator& evaluator, store::Store& store, const TaskCatalog& catalog,
                             RewardServiceOptions options, Metrics& metrics)
    : state_(std::make_unique<State>(evaluator, store, catalog, std::move(options), metrics)) {}

RewardService::~RewardService() = default;

std::vector<RewardResult> RewardService::score(const std::vector<RewardItem>& items,
                                               const std::string& request_id,
                                               std::optional<std::int64_t> step) {
  auto& s = *state_;
  std::vector<RewardResult> results(items.size());
  std::vector<std::optional<std::pair<std::shared_future<Evaluated>, bool>>> pending(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const CatalogTask* task = s.catalog.find(items[i].task);
    if (task == nullptr)
      throw std::invalid_argument(fmt::format("unknown task '{}'", items[i].task));
    results[i].task = task->key;
    std::string code, analysis;
    if (!items[i].unusable.empty()) {
      results[i].status = "unparseable";
      results[i].error = items[i].unusable;
      continue;
    }
    if (items[i].code) {
      code = *items[i].code;
    } else {
      const ExtractedCode extracted = code_of_completion(items[i].completion.value_or(""));
      if (!extracted.ok) {
        results[i].status = "unparseable";
        results[i].error = extracted.problem;
        continue;
      }
      code = extracted.code;
      analysis = extracted.analysis;
    }
    pending[i] = s.evaluation_for(*task, code, analysis);
  }
  std::size_t cached = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& r = results[i];
    if (pending[i]) {
      const Evaluated e = pending[i]->first.get();
      r.status = e.status;
      r.speedup = e.speedup;
      r.flags = e.flags;
      r.candidate_id = e.candidate_id;
      r.error = e.error;
      r.cached = e.cached || !pending[i]->second;
      r.raw_reward = rl::raw_reward(r.status, r.flags, e.verdict_reward, s.options.policy.floor);
    } else {
      r.raw_reward = s.options.policy.floor;
    }
    if (r.cached) ++cached;
    s.metrics.observe_raw_reward(r.raw_reward);
  }
  s.smooth(results, items, request_id, step);
  s.metrics.count_rewards(items.size(), cached);
  return results;
}

std::size_t RewardService::queue_depth() const {
  std::lock_guard lock(state_->jobs_mutex);
  return state_->jobs.size();
}

std::size_t RewardService::evaluations_in_flight() const {
  std::lock_guard lock(state_->jobs_mutex);
  return state_->running;
}

const RewardServiceOptions& RewardService::options() const {
  return state_->options;
}

}  // namespace cudal1::serve
