#include "cudal1/search/suite_generation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "cudal1/common/completion_rate.hpp"
#include "cudal1/common/error.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/optimizer.hpp"
#include "cudal1/search/run_summary.hpp"
#include "cudal1/task/suite.hpp"

namespace cudal1::search {
namespace {

namespace fs = std::filesystem;

constexpr const char* kGenerateTemplate = "generate.md";

bool is_generate_run(const store::RunRecord& run, std::optional<int> round) {
  if (stage_of_run(run.options, run.llm) != kStageGenerate) return false;
  return !round || run.options.value("round", -1) == *round;
}

// OUT/round<K>: the directory of one generation, holding a directory per task.
fs::path generation_dir(const fs::path& out, int round) {
  return out / fmt::format("round{}", round);
}

// The generation directory of a run: its own directory is <generation>/<level>/<name>.
fs::path generation_dir_of(const store::RunRecord& run) {
  return fs::path(run.options.value("out", "")).parent_path().parent_path();
}

// The summary of one generation directory: totals, then one entry per task.
nlohmann::json generation_summary(store::Store& store, const std::vector<store::RunRecord>& runs) {
  nlohmann::json per_task = nlohmann::json::array();
  std::map<std::string, int> statuses;
  long long candidates = 0, evaluations = 0, prompt_tokens = 0, completion_tokens = 0;
  std::size_t finished = 0, verified = 0;
  for (const auto& run : runs) {
    const nlohmann::json s = summarize_run(store, run.id);
    const bool done = store.run(run.id)->state == "finished";
    finished += done;
    verified += s["best_speedup"].is_number();
    candidates += s.value("candidates", 0LL);
    evaluations += s.value("evaluations", 0LL);
    prompt_tokens += s.value("prompt_tokens", 0LL);
    completion_tokens += s.value("completion_tokens", 0LL);
    for (const auto& [status, count] : s["statuses"].items()) statuses[status] += count.get<int>();
    per_task.push_back({{"task", run.options.value("suite_key", "")},
                        {"run_id", run.id},
                        {"dir", run.options.value("out", "")},
                        {"finished", done},
                        {"candidates", s["candidates"]},
                        {"statuses", s["statuses"]},
                        {"pending_prompts", s["pending_prompts"]},
                        {"best_speedup", s["best_speedup"]},
                        {"best_candidate_id", s["best_candidate_id"]}});
  }
  const auto& first = runs.front();
  return {{"stage", kStageGenerate},
          {"round", first.options.value("round", 0)},
          {"model", first.model},
          {"llm", first.llm},
          {"tasks", runs.size()},
          {"finished", finished},
          {"tasks_verified", verified},
          {"candidates", candidates},
          {"evaluations", evaluations},
          {"statuses", statuses},
          {"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"per_task", per_task}};
}

}  // namespace

struct SuiteGeneration::State {
  Evaluator& evaluator;
  store::Store& store;
  std::shared_ptr<llm::LlmClient> client;
  fs::path out_dir;
  fs::path prompts_dir;
  EvalOptions eval_options;
  std::shared_ptr<DeviceLoad> devices;
  std::size_t tasks_at_once = 2;
  std::function<void(const GenerateProgress&)> progress;
  std::shared_ptr<const review::RewardChecker> reward_checker;

  // Progress of the runs being driven (guarded by progress_mutex).
  std::mutex progress_mutex;
  std::map<std::int64_t, OptimizeProgress> latest;  // by run, the last report of each
  GenerateProgress totals;
  CompletionRate finishes;
  std::optional<std::string> abort_message;  // the first run that could not go on, and why
  bool llm_failed = false;

  State(Evaluator& e, store::Store& s, std::shared_ptr<llm::LlmClient> c, fs::path out,
        fs::path prompts, EvalOptions options, std::vector<std::string> device_list)
      : evaluator(e),
        store(s),
        client(std::move(c)),
        out_dir(std::move(out)),
        prompts_dir(std::move(prompts)),
        eval_options(std::move(options)),
        devices(std::make_shared<DeviceLoad>(std::move(device_list))) {
    // The runs record every device they may use; evaluations pick one each.
    eval_options.device = fmt::format("{}", fmt::join(devices->devices(), ","));
  }

  void check_prompt_template() const {
    try {
      PromptLibrary::load(prompts_dir, kGenerateTemplate);
    } catch (const std::exception& e) {
      throw InputError(e.what());
    }
  }

  std::vector<store::RunRecord> runs_for_suite(const fs::path& suite,
                                               const GenerateSettings& settings);
  GenerateOutcome drive(const std::vector<store::RunRecord>& runs);
  void drive_one(const store::RunRecord& run, GenerateOutcome& outcome);
  void update(std::int64_t run_id, const OptimizeProgress& p);
  void report();
};

std::vector<store::RunRecord> SuiteGeneration::State::runs_for_suite(
    const fs::path& suite_dir, const GenerateSettings& settings) {
  if (settings.round < 0) throw InputError("--round must be 0 (stage 1) or more (stage 2)");
  OptimizeSettings run_settings;
  run_settings.model = settings.model;
  run_settings.rounds = 1;
  run_settings.samples = settings.samples;
  run_settings.evaluation = settings.evaluation;
  // Stage 1 starts from the task alone; later rounds may show what earlier rounds verified,
  // with where each one's time goes (the pool is the task's verified candidates of every run).
  run_settings.exemplars = settings.exemplars.value_or(settings.round == 0 ? 0 : 2);
  run_settings.prompt_profile = settings.prompt_profile;
  run_settings.show_failures = 0;
  run_settings.temperature = settings.temperature;
  run_settings.max_tokens = settings.max_tokens;
  run_settings.prompt_template = kGenerateTemplate;
  run_settings.stage = kStageGenerate;
  run_settings.stage_round = settings.round;
  run_settings.check();
  check_prompt_template();

  const Suite suite = Suite::load(suite_dir).select(settings.levels, settings.limit);
  check_task_formats(suite, evaluator.config().worker, evaluator.config().build_jobs);
  const auto recorded = store.runs();
  std::vector<store::RunRecord> runs;
  for (const auto& task : suite.tasks) {
    const auto record =
        store.upsert_task(fs::absolute(task.file).string(), read_source_file(task.file, "task"));
    const auto same = std::find_if(recorded.begin(), recorded.end(), [&](const auto& run) {
      return is_generate_run(run, settings.round) && run.task_id == record.id &&
             run.model == settings.model && run.options.value("suite_key", "") == task.key();
    });
    if (same != recorded.end()) {
      runs.push_back(*same);
      continue;
    }
    run_settings.suite_key = task.key();
    Optimizer creator(evaluator, store, client,
                      generation_dir(out_dir, settings.round) / task.key(), prompts_dir,
                      eval_options);
    runs.push_back(*store.run(creator.create(record, run_settings)));
  }
  return runs;
}

void SuiteGeneration::State::update(std::int64_t run_id, const OptimizeProgress& p) {
  std::lock_guard lock(progress_mutex);
  latest[run_id] = p;
  report();
}

// Called with progress_mutex held: the callback writes one line at a time.
void SuiteGeneration::State::report() {
  if (!progress) return;
  GenerateProgress p = totals;
  for (const auto& [run, q] : latest) {
    p.requests_in_flight += q.requests_in_flight;
    p.prompts_waiting += q.prompts_waiting;
    p.evaluations_done += q.evaluations_done;
    p.evaluations_running += q.evaluations_running;
    p.tokens += q.tokens;
  }
  p.elapsed_s = finishes.elapsed_s();
  p.eta_s = finishes.eta_s(p.tasks - p.done);
  progress(p);
}

void SuiteGeneration::State::drive_one(const store::RunRecord& run, GenerateOutcome& outcome) {
  const bool finished_before = run.state == "finished";
  Optimizer optimizer(evaluator, store, client, run.options.value("out", ""), prompts_dir,
                      eval_options);
  optimizer.set_reward_checker(reward_checker);
  optimizer.spread_over(devices);
  optimizer.on_progress([this, id = run.id](const OptimizeProgress& p) { update(id, p); });
  std::optional<OptimizeOutcome> result;
  std::string failure;
  bool llm = false;
  try {
    result = optimizer.resume(run.id);
  } catch (const LlmAbort& e) {
    failure = e.what();
    llm = true;
  } catch (const std::exception& e) {
    failure = fmt::format("internal error in the run of {} (run {}): {}",
                          run.options.value("suite_key", ""), run.id, e.what());
  }
  std::lock_guard lock(progress_mutex);
  --totals.running;
  if (!result) {
    if (!abort_message) {
      abort_message = failure;
      llm_failed = llm;
    }
  } else if (result->finished) {
    ++outcome.finished;
    if (!finished_before) {
      ++totals.done;
      finishes.finished();
    }
  } else {
    outcome.pending_prompts += static_cast<std::size_t>(result->pending_prompts);
  }
  report();
}

GenerateOutcome SuiteGeneration::State::drive(const std::vector<store::RunRecord>& runs) {
  GenerateOutcome outcome;
  outcome.tasks = runs.size();
  {
    std::lock_guard lock(progress_mutex);
    totals = GenerateProgress{};
    totals.tasks = runs.size();
    for (const auto& run : runs) totals.resumed += run.state == "finished";
    totals.done = totals.resumed;
    finishes = CompletionRate();
  }
  std::deque<store::RunRecord> queue(runs.begin(), runs.end());  // guarded by progress_mutex
  std::vector<std::thread> workers;
  const std::size_t width = std::min(tasks_at_once, std::max<std::size_t>(1, runs.size()));
  for (std::size_t i = 0; i < width; ++i) {
    workers.emplace_back([&] {
      for (;;) {
        store::RunRecord run;
        {
          std::lock_guard lock(progress_mutex);
          // After a failure no new run starts: the runs in flight end on their own.
          if (queue.empty() || abort_message) return;
          run = std::move(queue.front());
          queue.pop_front();
          ++totals.running;
        }
        drive_one(run, outcome);
      }
    });
  }
  for (auto& worker : workers) worker.join();

  // One summary per generation directory, beside its tasks' directories.
  std::map<fs::path, std::vector<store::RunRecord>> by_dir;
  for (const auto& run : runs) by_dir[generation_dir_of(run)].push_back(run);
  for (const auto& [dir, members] : by_dir) {
    nlohmann::json summary = generation_summary(store, members);
    summary["dir"] = dir.string();
    fs::create_directories(dir);
    write_file_atomic(dir / "summary.json", summary.dump(2) + "\n");
    outcome.summaries.push_back(std::move(summary));
  }
  if (abort_message) {
    if (llm_failed) throw LlmAbort(*abort_message);
    throw std::runtime_error(*abort_message);
  }
  outcome.stop_reason = outcome.finished == outcome.tasks ? "finished"
                        : !client                         ? "waiting for batch replies"
                                                          : "incomplete";
  return outcome;
}

SuiteGeneration::SuiteGeneration(Evaluator& evaluator, store::Store& store,
                                 std::shared_ptr<llm::LlmClient> client, fs::path out_dir,
                                 fs::path prompts_dir, EvalOptions eval_options,
                                 std::vector<std::string> devices)
    : state_(std::make_unique<State>(evaluator, store, std::move(client), std::move(out_dir),
                                     std::move(prompts_dir), std::move(eval_options),
                                     std::move(devices))) {}

SuiteGeneration::~SuiteGeneration() = default;

void SuiteGeneration::on_progress(std::function<void(const GenerateProgress&)> callback) {
  state_->progress = std::move(callback);
}

void SuiteGeneration::set_reward_checker(std::shared_ptr<const review::RewardChecker> checker) {
  state_->reward_checker = std::move(checker);
}

void SuiteGeneration::set_tasks_at_once(std::size_t tasks) {
  state_->tasks_at_once = std::max<std::size_t>(1, tasks);
}

GenerateOutcome SuiteGeneration::generate(const fs::path& suite, const GenerateSettings& settings) {
  return state_->drive(state_->runs_for_suite(suite, settings));
}

GenerateOutcome SuiteGeneration::resume(std::optional<int> round) {
  state_->check_prompt_template();
  std::vector<store::RunRecord> runs;
  for (const auto& run : state_->store.runs()) {
    if (is_generate_run(run, round)) runs.push_back(run);
  }
  if (runs.empty()) {
    throw InputError(fmt::format(
        "{} holds no cudal1 generate run{}: start one with cudal1 "
        "generate --suite DIR --llm ... --model ...",
        state_->store.path().string(), round ? fmt::format(" of round {}", *round) : ""));
  }
  return state_->drive(runs);
}

}  // namespace cudal1::search
