#include "cudal1/bench/runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "cudal1/bench/baseline.hpp"
#include "cudal1/bench/result_line.hpp"
#include "cudal1/bench/result_log.hpp"
#include "cudal1/bench/solutions.hpp"
#include "cudal1/bench/summary.hpp"
#include "cudal1/common/completion_rate.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/evaluator.hpp"
#include "cudal1/task/source_check.hpp"
#include "run_directory.hpp"

namespace cudal1::bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// How often the dispatcher looks at the evaluations in flight: each takes seconds, so a tenth of
// a second costs nothing in throughput and keeps Ctrl-C and the progress line responsive.
constexpr auto kPollInterval = std::chrono::milliseconds(100);
// A baseline's failure reason is kept to a few lines in results.jsonl.
constexpr std::size_t kReasonChars = 600;
// torch.compile compiles on the reference's first call, inside the correctness phase; with
// max-autotune it benchmarks many kernel configurations for every GEMM and convolution, which
// takes minutes for a large model. Bounded so that a compiler that never finishes still ends.
constexpr double kCompiledCorrectnessSeconds = 1800;

std::string shortened(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return text.substr(0, max_chars) + " ...";
}

// The task's own code failed: reported as a failure flagged task_error, and retried by a re-run.
Verdict failed_task(const std::string& message) {
  Verdict verdict;
  verdict.status = Status::kRuntimeError;
  verdict.error = message.substr(0, message.find('\n'));
  verdict.log = trim_log(message);
  verdict.task_flags.push_back(kTaskError);
  verdict.finalize();
  return verdict;
}

bool has_task_error(const json& line) {
  const json flags = line.value("task_flags", json::array());
  return std::find(flags.begin(), flags.end(), kTaskError) != flags.end();
}

// An earlier line that also says the task has no solution (whichever solutions file said so),
// with an entry for every baseline asked for now.
bool still_missing(const json& earlier, const json& line) {
  if (earlier.value("status", "") != kMissing) return false;
  const json entries = earlier.value("baselines", json::object());
  for (const auto& [name, entry] : line["baselines"].items()) {
    if (!entries.contains(name)) return false;
  }
  return true;
}

struct TaskWork {
  const SuiteTask* task = nullptr;
  EvaluatedSolution solution;
  std::string device;
  std::optional<Verdict> eager;
  json baselines = json::object();
  std::vector<std::string> baselines_to_run;  // non-eager, once the eager verdict is known
  std::size_t pending = 0;                    // evaluations queued or in flight
  bool internal_error = false;
};

struct Job {
  std::size_t work = 0;
  std::string baseline;
};

}  // namespace

struct BenchRunner::State {
  BenchSettings settings;
  std::function<void(const BenchProgress&)> progress;
  std::function<void(const std::string&)> warning;
  Evaluator* evaluator = nullptr;

  // One run.
  std::unique_ptr<RunDirectory> directory;
  std::unique_ptr<ResultLog> log;
  Suite selected;
  std::vector<std::string> devices;
  std::map<std::string, std::string> unavailable;  // baseline -> why it cannot run here
  std::vector<std::string> unmatched;              // solutions for tasks not in the suite
  std::vector<TaskWork> works;
  std::deque<Job> queue;
  struct Flight {
    Job job;
    std::string device;
    std::future<Verdict> future;
  };
  std::list<Flight> flights;
  CompletionRate finishes;      // tasks finished by this run, and the time since it started
  std::size_t evaluated = 0;    // solutions evaluated against the eager reference here
  std::size_t evaluations = 0;  // every evaluation completed here, baselines included
  std::size_t resumed = 0;
  std::size_t internal_errors = 0;
  // GPUs named by the results an earlier run left in OUT, and whether this run's GPU was
  // compared with them yet.
  std::set<std::string> earlier_gpus;
  bool gpu_compared = false;

  void warn(const std::string& text) const {
    if (warning) warning(text);
  }
  json baseline_entries_without_solution() const;
  void plan(const SolutionSet& solutions);
  void start_baselines(TaskWork& work);
  void finish(TaskWork& work);
  std::string least_loaded_device() const;
  void submit(const Job& job);
  void complete(const Job& job, std::future<Verdict>& future);
  void internal_error(TaskWork& work, const Job& job, const std::string& what);
  void compare_gpu(const Verdict& verdict);
  void report_progress() const;
  json summary() const;
};

json BenchRunner::State::baseline_entries_without_solution() const {
  json entries = json::object();
  for (const std::string& name : settings.baselines) {
    const auto reason = unavailable.find(name);
    entries[name] = reason != unavailable.end()
                        ? unavailable_entry(reason->second)
                        : untimed_entry(kMissing, "no solution for this task");
  }
  return entries;
}

void BenchRunner::State::plan(const SolutionSet& solutions) {
  works.reserve(selected.tasks.size());
  for (const SuiteTask& task : selected.tasks) {
    const Solution* solution = solutions.find(task.ref);
    const json* earlier = log->find(task.ref);
    if (solution == nullptr || !solution->code) {
      const std::string why =
          solution == nullptr
              ? fmt::format("no solution for this task in {}", solutions.source.string())
              : fmt::format("the solution is null or empty ({})", solution->origin);
      const json line = missing_line(task, why, baseline_entries_without_solution());
      if (earlier && still_missing(*earlier, line)) {
        ++resumed;
      } else {
        log->append(line);
      }
      continue;
    }
    TaskWork work;
    work.task = &task;
    work.solution.sha256 = sha256_hex(*solution->code);
    const bool same_code = earlier &&
                           earlier->value("solution_sha256", json()) == work.solution.sha256 &&
                           earlier->contains("verdict") && (*earlier)["verdict"].is_object() &&
                           !has_task_error(*earlier);
    work.solution.file = directory->write_solution(task, *solution->code);
    if (same_code) {
      work.baselines = earlier->value("baselines", json::object());
      for (const std::string& name : settings.baselines) {
        if (!work.baselines.contains(name)) work.baselines_to_run.push_back(name);
      }
      if (work.baselines_to_run.empty()) {
        ++resumed;
        continue;
      }
      // Only the baselines this task has no entry for yet; the eager verdict is the earlier one.
      work.eager = Verdict::from_json((*earlier)["verdict"]);
      const json device = (*earlier)["verdict"].value("device", json());
      // Its baselines run on the device that measured it, when that one is still in use.
      if (device.is_object() && device.contains("index") && device["index"].is_string()) {
        const std::string index = device["index"].get<std::string>();
        if (std::find(devices.begin(), devices.end(), index) != devices.end()) work.device = index;
      }
    } else {
      work.baselines_to_run.assign(settings.baselines.begin() + 1, settings.baselines.end());
    }
    works.push_back(std::move(work));
  }
  for (std::size_t i = 0; i < works.size(); ++i) {
    if (works[i].eager) {
      start_baselines(works[i]);
    } else {
      queue.push_back({i, kEager});
      ++works[i].pending;
    }
  }
}

void BenchRunner::State::start_baselines(TaskWork& work) {
  const std::size_t index = static_cast<std::size_t>(&work - works.data());
  const std::string status(to_string(work.eager->status));
  std::vector<Job> jobs;
  for (const std::string& name : work.baselines_to_run) {
    if (const auto reason = unavailable.find(name); reason != unavailable.end()) {
      work.baselines[name] = unavailable_entry(reason->second);
    } else if (work.eager->status != Status::kOk) {
      work.baselines[name] = untimed_entry(
          status, fmt::format("not timed: the solution's status against the eager reference is {}",
                              status));
    } else {
      jobs.push_back({index, name});
    }
  }
  work.baselines_to_run.clear();
  // A task's baselines go to the front of the queue: the task finishes, and is written to
  // results.jsonl, as early as possible.
  for (auto job = jobs.rbegin(); job != jobs.rend(); ++job) queue.push_front(*job);
  work.pending += jobs.size();
  if (work.pending == 0) finish(work);
}

void BenchRunner::State::finish(TaskWork& work) {
  if (work.internal_error) {
    ++internal_errors;
    return;
  }
  log->append(result_line(*work.task, work.solution, *work.eager, work.baselines));
  finishes.finished();
}

std::string BenchRunner::State::least_loaded_device() const {
  std::vector<std::string> busy;
  for (const auto& flight : flights) busy.push_back(flight.device);
  return least_loaded(devices, busy);
}

void BenchRunner::State::submit(const Job& job) {
  TaskWork& work = works[job.work];
  if (work.device.empty()) work.device = least_loaded_device();
  EvalRequest request;
  request.task = job.baseline == kEager ? work.task->file
                                        : directory->write_baseline_task(job.baseline, *work.task);
  request.candidate = work.solution.file;
  request.options = settings.eval;
  request.options.device = work.device;
  request.options.progress = nullptr;
  if (job.baseline.starts_with("compile")) {
    request.options.limits.correctness_s =
        std::max(request.options.limits.correctness_s, kCompiledCorrectnessSeconds);
  }
  flights.push_back({job, work.device, evaluator->submit(std::move(request))});
}

void BenchRunner::State::complete(const Job& job, std::future<Verdict>& future) {
  TaskWork& work = works[job.work];
  const bool eager = job.baseline == kEager;
  std::optional<Verdict> verdict;
  try {
    verdict = future.get();
  } catch (const InputError& e) {
    if (e.subject() == InputError::Subject::kCandidate) {
      verdict = unusable_candidate_verdict(e.what());
    } else if (e.subject() == InputError::Subject::kTask && eager) {
      verdict = failed_task(e.what());
    } else if (e.subject() == InputError::Subject::kTask) {
      work.baselines[job.baseline] =
          unavailable_entry("the baseline task failed: " + shortened(e.what(), kReasonChars));
    } else {
      internal_error(work, job, e.what());
    }
  } catch (const std::exception& e) {
    internal_error(work, job, e.what());
  }
  ++evaluations;
  --work.pending;
  if (verdict) compare_gpu(*verdict);
  if (eager) {
    if (verdict) {
      ++evaluated;
      work.eager = *verdict;
      work.baselines[kEager] = baseline_entry(*verdict);
      start_baselines(work);
      return;
    }
    work.baselines_to_run.clear();
  } else if (verdict) {
    // The full verdict too (seeds to replay it, timing details); the eager one is the line's own.
    json entry = baseline_entry(*verdict);
    entry["verdict"] = verdict->to_json();
    work.baselines[job.baseline] = entry;
  }
  if (work.pending == 0) finish(work);
}

// The engine itself failed (not the task, not the solution): the task gets no result line, so
// the next run tries it again.
void BenchRunner::State::internal_error(TaskWork& work, const Job& job, const std::string& what) {
  warn(fmt::format("internal error on {} ({}): {}; not recorded, a re-run retries it",
                   work.task->key(), job.baseline, what));
  work.internal_error = true;
}

// Speedups measured on two GPU types do not belong in one result set.
void BenchRunner::State::compare_gpu(const Verdict& verdict) {
  if (gpu_compared || !verdict.device.is_object() || !verdict.device.contains("name")) return;
  gpu_compared = true;
  const std::string name = verdict.device["name"].get<std::string>();
  if (!earlier_gpus.empty() && !earlier_gpus.contains(name)) {
    warn(
        fmt::format("{} holds results measured on {}, this run measures on {}: their speedups "
                    "are not comparable; use another --out for this GPU",
                    directory->path().string(), fmt::join(earlier_gpus, ", "), name));
  }
}

void BenchRunner::State::report_progress() const {
  if (!progress) return;
  BenchProgress p;
  p.total = selected.tasks.size();
  for (const SuiteTask& task : selected.tasks) {
    const json* line = log->find(task.ref);
    if (line == nullptr) continue;
    ++p.done;
    ++(line->value("status", "") == "ok" ? p.ok : p.failed);
  }
  p.resumed = resumed;
  p.running = flights.size();
  p.queued = queue.size();
  p.elapsed_s = finishes.elapsed_s();
  p.eta_s = finishes.eta_s(p.total - p.done);
  progress(p);
}

json BenchRunner::State::summary() const {
  std::vector<json> lines;
  std::vector<std::string> unfinished;
  for (const SuiteTask& task : selected.tasks) {
    if (const json* line = log->find(task.ref)) {
      lines.push_back(*line);
    } else {
      unfinished.push_back(task.key());
    }
  }
  SummaryContext context;
  context.suite = selected.root;
  context.solutions = settings.solutions;
  context.device = devices.front() == "cpu" ? json("cpu") : json{{"index", devices.front()}};
  context.torch = evaluator->toolchain().info.value("torch", "");
  context.tolerance = settings.eval.tolerance.to_json();
  context.baselines = settings.baselines;
  context.unavailable = unavailable;
  context.unmatched_solutions = unmatched;
  const double wall = finishes.elapsed_s();
  context.throughput = {
      {"wall_s", wall},
      {"candidates", evaluated},
      {"evaluations", evaluations},
      {"candidates_per_hour", evaluated > 0 ? json(evaluated / wall * 3600.0) : json()},
      {"devices", devices.size()},
      {"build_jobs", evaluator->config().build_jobs}};
  json out = make_summary(lines, context);
  out["unfinished"] = {{"count", unfinished.size()}, {"tasks", unfinished}};
  return out;
}

BenchRunner::BenchRunner(BenchSettings settings, Evaluator& evaluator)
    : state_(std::make_unique<State>()) {
  state_->settings = std::move(settings);
  state_->evaluator = &evaluator;
}

BenchRunner::~BenchRunner() = default;

void BenchRunner::on_progress(std::function<void(const BenchProgress&)> callback) {
  state_->progress = std::move(callback);
}

void BenchRunner::on_warning(std::function<void(const std::string&)> callback) {
  state_->warning = std::move(callback);
}

BenchOutcome BenchRunner::run(const std::atomic<bool>* stop) {
  State& s = *state_;
  s.finishes = CompletionRate();
  BenchSettings& settings = s.settings;
  if (settings.baselines.empty() || settings.baselines.front() != kEager) {
    settings.baselines.insert(settings.baselines.begin(), kEager);
  }
  const Suite suite = Suite::load(settings.suite);
  s.selected = suite.select(settings.levels, settings.limit);
  const SolutionSet solutions = SolutionSet::load(settings.solutions);
  settings.solutions = solutions.source;
  for (const Solution* solution : unmatched_solutions(solutions, suite)) {
    s.unmatched.push_back(to_string(solution->task));
    s.warn(fmt::format(
        "{}: a solution for level {} task {}, which is not in the suite '{}' "
        "(ignored)",
        solution->origin, solution->task.level, solution->task.id, suite.root.string()));
  }

  check_task_formats(s.selected, s.evaluator->config().worker, s.evaluator->config().build_jobs);
  const Toolchain& toolchain = s.evaluator->toolchain();
  s.devices = resolve_devices(settings.device, toolchain.cuda_available,
                              settings.device != "cpu" ? visible_gpu_count() : std::nullopt);
  const std::string torch = toolchain.info.value("torch", "");
  for (const std::string& name : settings.baselines) {
    if (auto reason = baseline_unavailable(name, torch, s.devices.front() == "cpu")) {
      s.unavailable[name] = *reason;
    }
  }

  s.directory = std::make_unique<RunDirectory>(
      settings.out, json{{"suite", suite.root.string()},
                         {"solutions", solutions.source.string()},
                         {"devices", s.devices},
                         {"baselines", settings.baselines},
                         {"torch", torch},
                         {"tolerance", settings.eval.tolerance.to_json()},
                         {"created_at", utc_timestamp()}});
  s.log = std::make_unique<ResultLog>(s.directory->results_file());
  if (s.log->dropped_bytes() > 0) {
    s.warn(fmt::format("{}: dropped an unfinished last line ({} bytes) left by an interrupted run",
                       s.log->path().string(), s.log->dropped_bytes()));
  }
  for (const auto& [ref, line] : s.log->lines()) {
    const json device = line.value("verdict", json()).is_object()
                            ? line["verdict"].value("device", json())
                            : json();
    if (device.is_object() && device.contains("name")) s.earlier_gpus.insert(device["name"]);
  }
  s.plan(solutions);

  const std::size_t in_flight = s.evaluator->config().max_in_flight;
  bool interrupted = false;
  while (!s.queue.empty() || !s.flights.empty()) {
    if (stop != nullptr && stop->load()) {
      interrupted = true;
      break;
    }
    while (s.flights.size() < in_flight && !s.queue.empty()) {
      const Job job = s.queue.front();
      s.queue.pop_front();
      s.submit(job);
    }
    bool any_done = false;
    for (auto flight = s.flights.begin(); flight != s.flights.end();) {
      if (flight->future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
        ++flight;
        continue;
      }
      const Job job = flight->job;
      std::future<Verdict> future = std::move(flight->future);
      flight = s.flights.erase(flight);
      s.complete(job, future);
      any_done = true;
    }
    s.report_progress();
    if (!any_done) std::this_thread::sleep_for(kPollInterval);
  }
  s.report_progress();

  BenchOutcome outcome;
  // Interrupted too: a task finished again in this run must not leave its old line beside the
  // new one for readers of the file.
  s.log->compact();
  outcome.summary = s.summary();
  s.directory->write_summary(outcome.summary);
  outcome.results_file = s.log->path();
  outcome.summary_file = s.directory->summary_file();
  outcome.evaluated = s.evaluated;
  outcome.resumed = s.resumed;
  outcome.internal_errors = s.internal_errors;
  outcome.interrupted = interrupted;
  return outcome;
}

}  // namespace cudal1::bench
