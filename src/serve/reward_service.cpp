#include "cudal1/serve/reward_service.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "cudal1/common/error.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/review/hack_corpus.hpp"
#include "cudal1/search/optimize_settings.hpp"
#include "cudal1/serve/completion.hpp"
#include "cudal1/serve/task_fair_queue.hpp"

namespace cudal1::serve {
namespace {

// What an item needs of a verdict.
// An item whose task failed (its get_inputs, its model): the task's fault, not the candidate's.
constexpr const char* kTaskErrorStatus = "task_error";

struct Evaluated {
  std::optional<std::int64_t> candidate_id;
  std::string status;
  std::optional<double> speedup;
  std::optional<std::pair<double, double>> speedup_ci;
  std::vector<std::string> flags;
  double verdict_reward = 0;
  std::string error;
  bool cached = false;
  std::string review;
};

// The review's outcome as an item shows it: the reviewer's answer, or why there was none.
std::string review_outcome(const nlohmann::json& verdict) {
  const auto review = verdict.value("review", nlohmann::json());
  if (!review.is_object()) return "";
  const std::string state = review.value("state", "");
  if (state == "reviewed") {
    const auto answer = review.value("verdict", nlohmann::json());
    return answer.is_string() ? answer.get<std::string>() : "unparseable";
  }
  return state;
}

Evaluated evaluated_from(const store::VerdictRecord& record, bool cached) {
  Evaluated e;
  e.candidate_id = record.candidate_id;
  e.status = record.status;
  e.speedup = record.speedup;
  e.verdict_reward = record.reward;
  if (const auto ci = record.verdict.find("speedup_ci");
      ci != record.verdict.end() && ci->is_array() && ci->size() == 2 && (*ci)[0].is_number() &&
      (*ci)[1].is_number()) {
    e.speedup_ci = std::make_pair((*ci)[0].get<double>(), (*ci)[1].get<double>());
  }
  e.flags = record.verdict.value("flags", std::vector<std::string>{});
  e.error = record.verdict.value("error", "");
  e.cached = cached;
  e.review = review_outcome(record.verdict);
  return e;
}

// The answer recorded for a request, sent again.
ServedAnswer replayed(const store::AnswerRecord& earlier) {
  ServedAnswer served;
  served.body = earlier.body;
  served.replayed = true;
  served.answered_at = earlier.answered_at;
  return served;
}

// Seconds a verdict used its device: alone while timed (phases.device_held = [from, to], Unix
// seconds, or a list of them) plus its first calls and correctness trials (phases.device_shared,
// one [from, to] per hold), which may have shared the device with other evaluations' trials and so
// count in full here: an upper bound on its cost.
double device_seconds(const nlohmann::json& verdict) {
  const auto phases = verdict.value("phases", nlohmann::json::object());
  const auto span_seconds = [](const nlohmann::json& span) {
    if (span.is_array() && span.size() == 2 && span[0].is_number() && span[1].is_number())
      return span[1].get<double>() - span[0].get<double>();
    return 0.0;
  };
  // One hold, or one per batch of timing rounds (a list of [from, to]).
  const auto held = phases.value("device_held", nlohmann::json());
  double seconds = 0;
  if (held.is_array() && !held.empty() && held[0].is_array()) {
    for (const auto& span : held) seconds += span_seconds(span);
  } else {
    seconds = span_seconds(held);
  }
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

  // The evaluation slots: max_in_flight threads taking jobs, of the task with the fewest
  // running first (TaskFairQueue).
  std::mutex jobs_mutex;
  std::condition_variable jobs_ready;
  TaskFairQueue jobs;
  bool stopping = false;
  std::vector<std::thread> slots;
  DeviceLoad devices;  // evaluations in flight per device

  // The best verified speedup per task (ok, not unreviewed), for the checker's policy: read
  // from the store at the task's first verdict, raised as verdicts come.
  std::mutex best_mutex;
  std::map<std::string, std::optional<double>> best_verified;

  // Smoothing: one history per task, added to request by request in the order they are answered.
  std::mutex smoothing_mutex;
  rl::RewardSmoother smoother;
  std::set<std::string> restored;

  State(Evaluator& e, store::Store& s, const TaskCatalog& c, RewardServiceOptions o, Metrics& m)
      : evaluator(e),
        store(s),
        catalog(c),
        options(std::move(o)),
        metrics(m),
        jobs(options.start_by_task),
        devices(options.devices, options.task_affinity),
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
      std::pair<std::string, TaskFairQueue::Job> job;
      {
        std::unique_lock lock(jobs_mutex);
        jobs_ready.wait(lock, [this] { return stopping || !jobs.empty(); });
        // Jobs queued before the end still run: their requests are waiting for them.
        if (jobs.empty()) return;
        job = jobs.take();
      }
      job.second();
      std::lock_guard lock(jobs_mutex);
      jobs.done(job.first);
    }
  }

  void enqueue(const std::string& task, TaskFairQueue::Job job) {
    {
      std::lock_guard lock(jobs_mutex);
      jobs.push(task, std::move(job));
    }
    jobs_ready.notify_one();
  }

  std::int64_t run_for(const CatalogTask& task);
  std::pair<std::shared_future<Evaluated>, bool> evaluation_for(const CatalogTask& task,
                                                                const std::string& code,
                                                                const std::string& analysis);
  Evaluated evaluate(const CatalogTask& task, const store::CandidateRecord& candidate,
                     const std::filesystem::path& file);
  Evaluated task_failure(const CatalogTask& task, const std::string& why);
  std::optional<double> best_known(const CatalogTask& task, std::int64_t run);
  void review(const CatalogTask& task, const store::CandidateRecord& candidate, Verdict& verdict);
  void add_hack_case(const CatalogTask& task, std::int64_t candidate_id,
                     const std::filesystem::path& file, const Verdict& verdict);
  std::vector<RewardResult> results_of(const std::vector<RewardItem>& items);
  // Smoothed rewards and advantages of `results`, and their records; smoothing_mutex is held.
  std::vector<store::RewardRecord> smooth(std::vector<RewardResult>& results,
                                          const std::vector<RewardItem>& items,
                                          const RequestIdentity& request);
  ServedAnswer record(std::vector<RewardResult> results, const std::vector<RewardItem>& items,
                      const RequestIdentity& request,
                      const std::function<std::string(const std::vector<RewardResult>&)>& reply);
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
      // This server records a candidate only with its verdict; one without is what an older
      // cudal1 serve left when it was killed mid-evaluation, and would be kept for ever.
      if (const std::size_t removed = store.remove_unevaluated_candidates(run.id)) {
        spdlog::info("cudal1 serve: removed {} candidates of {} left unevaluated by a crash",
                     removed, task.key);
      }
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
    // Named by its run and code: the candidate has no id until it is recorded with its verdict.
    const auto file =
        options.work_dir / "candidates" / fmt::format("run{}_{}.py", run, sha.substr(0, 16));
    std::filesystem::create_directories(file.parent_path());
    write_file_atomic(file, code);
    enqueue(task.key, [this, &task, candidate = std::move(candidate), file, promise, key] {
      Evaluated result = evaluate(task, candidate, file);
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

Evaluated RewardService::State::evaluate(const CatalogTask& task,
                                         const store::CandidateRecord& candidate,
                                         const std::filesystem::path& file) {
  const DeviceLoad::Lease lease(devices, task.key);
  const std::string& device = lease.device();
  try {
    EvalRequest request{task.snapshot, file, options.eval};
    request.options.device = device;
    request.options.progress = nullptr;
    Verdict verdict;
    try {
      verdict = evaluator.evaluate(request);
    } catch (const InputError& e) {
      if (e.subject() == InputError::Subject::kTask) return task_failure(task, e.what());
      if (e.subject() != InputError::Subject::kCandidate) throw;
      verdict = unusable_candidate_verdict(e.what());
    }
    review(task, candidate, verdict);
    store::VerdictRecord record = store::verdict_record_of(0, verdict);
    record.candidate_id = store.add_evaluated_candidate(candidate, record);
    metrics.count_evaluation(record.status);
    metrics.add_device_seconds(device, device_seconds(record.verdict));
    metrics.count_loads(verdict.details.value("phases", nlohmann::json::object())
                            .value("load_parts", nlohmann::json()));
    if (verdict.status == Status::kRejected) {
      add_hack_case(task, record.candidate_id, file, verdict);
    }
    return evaluated_from(record, false);
  } catch (const std::exception& e) {
    // The engine itself failed (not the candidate): nothing is recorded, not even the candidate,
    // so the same code is evaluated again when it comes back; this item gets the failure reward.
    spdlog::error("cudal1 serve: evaluating {} for {} failed: {}", file.filename().string(),
                  task.key, e.what());
    metrics.count_evaluation("internal_error");
    Evaluated failed;
    failed.status = "runtime_error";
    failed.error = fmt::format("cudal1 internal error (not the candidate's): {}", e.what());
    return failed;
  }
}

std::optional<double> RewardService::State::best_known(const CatalogTask& task, std::int64_t run) {
  std::lock_guard lock(best_mutex);
  if (const auto it = best_verified.find(task.key); it != best_verified.end()) return it->second;
  std::optional<double> best;
  for (const auto& entry : store.pool(run)) {
    const auto& v = entry.verdict;
    if (!review::counts_as_best_known(v.outline())) continue;
    best = std::max(best.value_or(0.0), *v.speedup);
  }
  return best_verified[task.key] = best;
}

void RewardService::State::review(const CatalogTask& task, const store::CandidateRecord& candidate,
                                  Verdict& verdict) {
  if (!options.reward_checker) return;
  const auto result = options.reward_checker->check(
      verdict, {task.name, task.source, candidate.source}, best_known(task, candidate.run_id));
  if (result) {
    metrics.count_review(result->state == "reviewed" ? result->verdict : result->state);
    spdlog::info("cudal1 serve: {} {}: {}", task.key, candidate.source_sha256.substr(0, 12),
                 review::review_line(*result));
  }
  if (review::counts_as_best_known(verdict)) {
    std::lock_guard lock(best_mutex);
    auto& best = best_verified[task.key];
    best = std::max(best.value_or(0.0), *verdict.speedup);
  }
}

Evaluated RewardService::State::task_failure(const CatalogTask& task, const std::string& why) {
  // The task's own code failed (its get_inputs, its model): no candidate is to blame, so nothing
  // is recorded and the item's reward says nothing either way (smooth() keeps it out of the
  // task's history and of its group's advantages).
  spdlog::error("cudal1 serve: the task {} failed: {}", task.key, why);
  metrics.count_evaluation("task_error");
  Evaluated failed;
  failed.status = kTaskErrorStatus;
  failed.error = "the task failed, not the candidate: " + why.substr(0, why.find('\n'));
  return failed;
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
  if (*reject == flag::kReviewRejected) {
    // The reviewer's class when it named a valid one ("review_rejected" says only who judged).
    const auto review = verdict.details.value("review", nlohmann::json::object());
    const auto named = review.value("class", nlohmann::json());
    if (named.is_string() && review::is_valid_hack_class(named.get<std::string>()))
      request.hack_class = named.get<std::string>();
  }
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

std::vector<RewardResult> RewardService::State::results_of(const std::vector<RewardItem>& items) {
  std::vector<RewardResult> results(items.size());
  std::vector<std::optional<std::pair<std::shared_future<Evaluated>, bool>>> pending(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const CatalogTask* task = catalog.find(items[i].task);
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
    pending[i] = evaluation_for(*task, code, analysis);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& r = results[i];
    if (pending[i]) {
      const Evaluated e = pending[i]->first.get();
      r.status = e.status;
      r.speedup = e.speedup;
      r.speedup_ci = e.speedup_ci;
      r.flags = e.flags;
      r.candidate_id = e.candidate_id;
      r.error = e.error;
      r.cached = e.cached || !pending[i]->second;
      r.review = e.review;
      r.raw_reward = rl::raw_reward(r.status, r.flags, e.verdict_reward, options.policy.floor);
    } else {
      r.raw_reward = options.policy.floor;
    }
  }
  return results;
}

std::vector<store::RewardRecord> RewardService::State::smooth(std::vector<RewardResult>& results,
                                                              const std::vector<RewardItem>& items,
                                                              const RequestIdentity& request) {
  std::vector<store::RewardRecord> records;
  // One request's items of each task are scored together, against the same statistics: the
  // smoothed reward of an item depends on the request's rewards of its task, not on its place.
  std::map<std::string, std::vector<std::size_t>> by_task;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    if (restored.insert(r.task).second) {
      smoother.restore(r.task, store.recent_raw_rewards(r.task, options.policy.window));
    }
    // A task's failure says nothing about the candidate: outside the task's history, reward 0
    // (the mean of the task's rewards: no preference).
    if (r.status == kTaskErrorStatus) {
      r.reward = 0;
      continue;
    }
    by_task[r.task].push_back(i);
  }
  for (const auto& [task, members] : by_task) {
    std::vector<double> raws;
    for (std::size_t i : members) raws.push_back(results[i].raw_reward);
    const std::vector<double> scores = smoother.score(task, raws);
    for (std::size_t k = 0; k < members.size(); ++k) results[members[k]].reward = scores[k];
  }
  std::vector<double> rewards;
  std::vector<std::optional<std::string>> groups;
  for (std::size_t i = 0; i < results.size(); ++i) {
    rewards.push_back(results[i].reward);
    groups.push_back(results[i].status == kTaskErrorStatus ? std::nullopt : items[i].group);
  }
  const auto advantages = rl::group_advantages(rewards, groups, options.policy.advantage_epsilon);
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto& r = results[i];
    r.advantage = advantages[i];
    if (r.status == kTaskErrorStatus && items[i].group) r.advantage = 0.0;
    store::RewardRecord record;
    record.task_key = r.task;
    record.candidate_id = r.candidate_id;
    record.request_id = request.request_id;
    record.step = request.step;
    record.group = items[i].group;
    record.status = r.status;
    record.raw_reward = r.raw_reward;
    record.reward = r.reward;
    record.advantage = r.advantage;
    records.push_back(std::move(record));
  }
  return records;
}

ServedAnswer RewardService::State::record(
    std::vector<RewardResult> results, const std::vector<RewardItem>& items,
    const RequestIdentity& request,
    const std::function<std::string(const std::vector<RewardResult>&)>& reply) {
  // Held while the rewards are recorded too: the store's order is the order of the histories.
  std::lock_guard lock(smoothing_mutex);
  const std::vector<store::RewardRecord> records = smooth(results, items, request);
  // Rewards that end up not recorded were never given: the histories they went into are read
  // again from the store when next needed.
  const auto forget_histories = [&] {
    for (const auto& r : results) restored.erase(r.task);
  };
  store::AnswerRecord answer;
  answer.request_key = request.key;
  answer.request_id = request.request_id;
  answer.endpoint = request.endpoint;
  answer.answered_at = store::now_iso8601();
  bool recorded = false;
  try {
    answer.body = reply(results);
    recorded = store.record_answer(answer, records, request.replay_seconds);
  } catch (...) {
    forget_histories();
    throw;
  }
  if (!recorded) {
    // Another server on the same store answered the same request meanwhile: its answer stands.
    forget_histories();
    return replayed(store.answer(request.key, request.replay_seconds).value());
  }
  std::size_t cached = 0;
  for (const auto& r : results) {
    if (r.cached) ++cached;
    if (r.status != kTaskErrorStatus) metrics.observe_raw_reward(r.raw_reward);
  }
  metrics.count_rewards(results.size(), cached);
  ServedAnswer served;
  served.body = std::move(answer.body);
  served.results = std::move(results);
  served.answered_at = answer.answered_at;
  return served;
}

RewardService::RewardService(Evaluator& evaluator, store::Store& store, const TaskCatalog& catalog,
                             RewardServiceOptions options, Metrics& metrics)
    : state_(std::make_unique<State>(evaluator, store, catalog, std::move(options), metrics)) {}

RewardService::~RewardService() = default;

ServedAnswer RewardService::answer(
    const std::vector<RewardItem>& items, const RequestIdentity& request,
    const std::function<std::string(const std::vector<RewardResult>&)>& reply) {
  auto& s = *state_;
  if (const auto earlier = s.store.answer(request.key, request.replay_seconds)) {
    return replayed(*earlier);
  }
  return s.record(s.results_of(items), items, request, reply);
}

std::size_t RewardService::queue_depth() const {
  std::lock_guard lock(state_->jobs_mutex);
  return state_->jobs.queued();
}

std::size_t RewardService::evaluations_in_flight() const {
  std::lock_guard lock(state_->jobs_mutex);
  return state_->jobs.running();
}

nlohmann::json RewardService::worker_pools() const {
  return state_->evaluator.worker_pools();
}

const RewardServiceOptions& RewardService::options() const {
  return state_->options;
}

}  // namespace cudal1::serve
