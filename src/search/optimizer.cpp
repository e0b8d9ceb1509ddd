#include "cudal1/search/optimizer.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/text_file.hpp"
#include "cudal1/search/contrastive_prompt.hpp"
#include "cudal1/search/response_parser.hpp"
#include "cudal1/search/run_summary.hpp"
#include "cudal1/task/source_check.hpp"

namespace cudal1::search {
namespace {

using store::CandidateRecord;
using store::PromptRecord;
using store::VerdictRecord;

// Errors that make every further request pointless: fix the setup, then resume.
bool aborts_run(llm::LlmError::Kind kind) {
  using Kind = llm::LlmError::Kind;
  return kind == Kind::kAuth || kind == Kind::kBadRequest || kind == Kind::kTransient ||
         kind == Kind::kCommand;
}

}  // namespace

struct Optimizer::State {
  Evaluator& evaluator;
  store::Store& store;
  std::shared_ptr<llm::LlmClient> client;
  std::shared_ptr<DeviceLoad> devices;  // null: the run's own device
  std::filesystem::path out_dir;
  std::filesystem::path prompts_dir;
  EvalOptions eval_options;
  std::function<void(const OptimizeProgress&)> progress;
  std::shared_ptr<const review::RewardChecker> reward_checker;

  // The run being driven.
  store::RunRecord run;
  store::TaskRecord task;
  OptimizeSettings settings;
  std::optional<PromptLibrary> library;
  std::filesystem::path task_copy;
  std::string device_text;

  std::atomic<int> in_flight{0};
  std::atomic<int> evaluating{0};
  std::mutex abort_mutex;
  std::optional<std::string> abort_message;
  // Sources being evaluated right now, so identical ones wait for one evaluation.
  std::mutex sources_mutex;
  std::map<std::string, std::shared_future<Verdict>> sources;

  State(Evaluator& e, store::Store& s, std::shared_ptr<llm::LlmClient> c, std::filesystem::path out,
        std::filesystem::path prompts, EvalOptions options)
      : evaluator(e),
        store(s),
        client(std::move(c)),
        out_dir(std::move(out)),
        prompts_dir(std::move(prompts)),
        eval_options(std::move(options)) {}

  // ---- run set-up ----------------------------------------------------------------------------
  void prepare(std::int64_t run_id);
  void ensure_reference();
  OptimizeOutcome drive();

  // ---- rounds --------------------------------------------------------------------------------
  int current_round();
  bool round_complete(int round);
  std::vector<store::PoolEntry> task_pool(std::map<std::int64_t, int>& sample_of_prompt);
  void create_round(int round);
  void process_round(int round);
  bool budget_reached();

  // ---- one prompt ----------------------------------------------------------------------------
  void handle_prompt(PromptRecord prompt);
  std::optional<std::int64_t> request_reply(const PromptRecord& prompt);
  std::int64_t record_candidate(const PromptRecord& prompt, const store::ResponseRecord& response);
  void evaluate_candidate(const CandidateRecord& candidate);
  Verdict evaluate_source(const CandidateRecord& candidate);
  void review(Verdict& verdict, const CandidateRecord& candidate);
  std::optional<double> best_known_speedup();

  void abort_with(const std::string& message) {
    std::lock_guard<std::mutex> lock(abort_mutex);
    if (!abort_message) abort_message = message;
  }
  bool aborted() {
    std::lock_guard<std::mutex> lock(abort_mutex);
    return abort_message.has_value();
  }
  void report(int round);
  // A round in which every request failed (malformed or empty replies) says the set-up is wrong.
  void check_round_failures(int round) {
    std::string first_error;
    int prompts = 0, failed = 0;
    for (const auto& p : store.prompts(run.id)) {
      if (p.round != round) continue;
      ++prompts;
      if (p.state == "failed") {
        ++failed;
        if (first_error.empty()) first_error = p.error;
      }
    }
    if (prompts > 0 && failed == prompts) {
      abort_with(
          fmt::format("every request of round {} failed; the first: {}", round, first_error));
    }
  }
  nlohmann::json write_summary(const std::string& stop_reason, bool finished);
};

void Optimizer::State::prepare(std::int64_t run_id) {
  auto found = store.run(run_id);
  if (!found) throw InputError(fmt::format("run {} is not in {}", run_id, store.path().string()));
  run = *found;
  task = *store.task(run.task_id);
  settings = OptimizeSettings::from_json(run.options);
  library = PromptLibrary::load(prompts_dir, settings.prompt_template);
  std::filesystem::create_directories(out_dir / "candidates");
  // Candidates are always evaluated against the task as it was when the run started.
  task_copy = out_dir / "task.py";
  if (!std::filesystem::exists(task_copy) || read_file(task_copy) != task.source) {
    write_file_atomic(task_copy, task.source);
  }
  const std::string device = run.options.value("device", eval_options.device);
  eval_options.device = device;
  device_text = device == "cpu" ? "the CPU" : "a CUDA GPU";
}

void Optimizer::State::ensure_reference() {
  for (const auto& c : store.candidates(run.id)) {
    if (c.kind == "reference") return;
  }
  CandidateRecord reference;
  reference.run_id = run.id;
  reference.kind = "reference";
  reference.source = task.source;
  reference.source_sha256 = sha256_hex(task.source);
  reference.analysis = "the task's own Model";
  const std::int64_t id = store.add_candidate(reference);
  VerdictRecord verdict;
  verdict.candidate_id = id;
  verdict.status = "ok";
  verdict.speedup = 1.0;
  verdict.reward = 1.0;
  verdict.verdict = {{"status", "ok"}, {"speedup", 1.0}, {"reference", true}};
  verdict.evaluated_at = store::now_iso8601();
  store.record_verdict(verdict);
}

int Optimizer::State::current_round() {
  int round = 0;
  for (const auto& p : store.prompts(run.id)) round = std::max(round, p.round);
  return round;
}

bool Optimizer::State::round_complete(int round) {
  for (const auto& p : store.prompts(run.id)) {
    if (p.round != round) continue;
    if (p.state == "pending") return false;
    if (p.state == "answered") {
      const auto candidate = store.candidate_for_prompt(p.id);
      if (!candidate || !store.verdict(candidate->id)) return false;
    }
  }
  return true;
}

bool Optimizer::State::budget_reached() {
  if (!settings.budget_tokens) return false;
  const auto counts = store.counts(run.id);
  return counts.prompt_tokens + counts.completion_tokens >= *settings.budget_tokens;
}

std::vector<store::PoolEntry> Optimizer::State::task_pool(
    std::map<std::int64_t, int>& sample_of_prompt) {
  // Every verified candidate of this task measured on this device, earlier runs included; the
  // reference once (this run's).
  std::vector<store::PoolEntry> entries;
  for (const auto& other : store.runs()) {
    const auto other_task = store.task(other.task_id);
    if (!other_task || other_task->source_sha256 != task.source_sha256) continue;
    if (other.options.value("device", "") != run.options.value("device", "")) continue;
    for (const auto& p : store.prompts(other.id)) sample_of_prompt[p.id] = p.sample;
    for (auto& entry : store.pool(other.id)) {
      if (entry.candidate.kind == "reference" && other.id != run.id) continue;
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

void Optimizer::State::create_round(int round) {
  std::map<std::int64_t, int> sample_of_prompt;
  const auto pool_entries = task_pool(sample_of_prompt);

  // The pool: every candidate verified correct and timed, and the reference at 1.00.
  std::vector<PoolMember> pool;
  std::vector<const store::PoolEntry*> members;
  std::vector<const store::PoolEntry*> failures;
  for (const auto& entry : pool_entries) {
    const bool reference = entry.candidate.kind == "reference";
    if (reference || (entry.verdict.status == "ok" && entry.verdict.speedup)) {
      const int island =
          entry.candidate.prompt_id ? sample_of_prompt[*entry.candidate.prompt_id] : 0;
      pool.push_back({entry.candidate.id, entry.verdict.speedup.value_or(1.0), island, reference});
      members.push_back(&entry);
    } else if (entry.candidate.kind == "generated" && !entry.verdict.duplicate_of) {
      failures.push_back(&entry);
    }
  }
  // Name the device once a verdict has (prompts then say "the NVIDIA H200", not "a CUDA GPU").
  for (const auto& entry : pool_entries) {
    const auto& device = entry.verdict.verdict.value("device", nlohmann::json());
    if (device.is_object() && device.contains("name")) {
      device_text = "the " + device["name"].get<std::string>();
      break;
    }
  }
  // The reference's profile: its side of the latest verdict that timed it.
  std::optional<Profile> reference_profile;
  for (auto it = pool_entries.rbegin(); it != pool_entries.rend() && !reference_profile; ++it) {
    if (it->candidate.kind != "reference")
      reference_profile = stored_profile(it->verdict.verdict, "reference");
  }
  const auto sampler = make_sampler(settings.sampler, settings.sampler_options);
  for (int sample = 0; sample < settings.samples; ++sample) {
    std::mt19937_64 rng(settings.seed ^ (static_cast<std::uint64_t>(round) << 32) ^
                        static_cast<std::uint64_t>(sample));
    PromptContext context;
    context.task_name = task.name;
    context.reference_code = task.source;
    context.device = device_text;
    context.tolerance = describe_tolerance(eval_options.tolerance);
    context.profile_detail = parse_profile_detail(settings.prompt_profile);
    PromptRecord prompt;
    for (std::size_t index : sampler->choose(pool, settings.exemplars, sample, rng)) {
      const auto& entry = *members[index];
      context.exemplars.push_back(
          {entry.candidate.id, entry.candidate.source, pool[index].speedup, pool[index].reference,
           pool[index].reference ? reference_profile
                                 : stored_profile(entry.verdict.verdict, "candidate")});
      prompt.exemplars.push_back(entry.candidate.id);
    }
    // The most recent failures, newest first: what went wrong is worth a paragraph.
    for (auto it = failures.rbegin();
         it != failures.rend() &&
         static_cast<int>(context.failures.size()) < settings.show_failures;
         ++it) {
      const auto& v = (*it)->verdict.verdict;
      const std::string error = v.value("error", "") + "\n" + v.value("log", "");
      context.failures.push_back(
          {(*it)->candidate.source, (*it)->verdict.status, trim_log(error, 600, 900)});
    }
    prompt.run_id = run.id;
    prompt.round = round;
    prompt.sample = sample;
    prompt.request =
        library->build(context, settings.model, settings.temperature, settings.max_tokens)
            .to_openai_body();
    store.add_prompt(prompt);
  }
}

std::optional<std::int64_t> Optimizer::State::request_reply(const PromptRecord& prompt) {
  if (aborted() || budget_reached()) return std::nullopt;
  ++in_flight;
  struct Done {
    std::atomic<int>& counter;
    ~Done() { --counter; }
  } done{in_flight};
  try {
    const llm::ChatResponse reply =
        client->complete(llm::ChatRequest::from_openai_body(prompt.request));
    store::ResponseRecord response;
    response.prompt_id = prompt.id;
    response.raw = reply.raw;
    response.content = reply.content;
    response.finish_reason = reply.finish_reason;
    response.prompt_tokens = reply.usage.prompt_tokens;
    response.completion_tokens = reply.usage.completion_tokens;
    response.received_at = store::now_iso8601();
    store.record_response(response);
    return prompt.id;
  } catch (const llm::LlmError& e) {
    if (aborts_run(e.kind())) {
      abort_with(fmt::format("the LLM at {} failed: {}", client->describe(), e.what()));
    } else {
      store.mark_prompt_failed(prompt.id, e.what());
    }
    return std::nullopt;
  }
}

std::int64_t Optimizer::State::record_candidate(const PromptRecord& prompt,
                                                const store::ResponseRecord& response) {
  if (auto existing = store.candidate_for_prompt(prompt.id)) return existing->id;
  const ParsedReply parsed = parse_reply(response.content);
  CandidateRecord candidate;
  candidate.run_id = run.id;
  candidate.prompt_id = prompt.id;
  candidate.kind = parsed.ok ? "generated" : "unparseable";
  candidate.source = parsed.code;
  candidate.source_sha256 = sha256_hex(parsed.code);
  candidate.analysis = parsed.analysis;
  candidate.parents = prompt.exemplars;
  const std::int64_t id = store.add_candidate(candidate);
  if (!parsed.ok) {
    VerdictRecord verdict;
    verdict.candidate_id = id;
    verdict.status = "unparseable";
    verdict.verdict = {{"status", "unparseable"},
                       {"error", parsed.problem},
                       {"finish_reason", response.finish_reason}};
    verdict.evaluated_at = store::now_iso8601();
    store.record_verdict(verdict);
  }
  return id;
}

Verdict Optimizer::State::evaluate_source(const CandidateRecord& candidate) {
  const auto path = out_dir / "candidates" / fmt::format("candidate_{}.py", candidate.id);
  write_file_atomic(path, candidate.source);
  EvalRequest request{task_copy, path, eval_options};
  request.options.progress = nullptr;
  std::optional<DeviceLoad::Lease> lease;
  if (devices) request.options.device = lease.emplace(*devices).device();
  try {
    return evaluator.evaluate(request);
  } catch (const InputError& e) {
    if (e.subject() != InputError::Subject::kCandidate) throw;
    // A candidate that is not valid Python, or has no ModelNew, is the model's failure.
    return unusable_candidate_verdict(e.what());
  }
}

std::optional<double> Optimizer::State::best_known_speedup() {
  std::map<std::int64_t, int> sample_of_prompt;
  std::optional<double> best;
  for (const auto& entry : task_pool(sample_of_prompt)) {
    const auto& v = entry.verdict;
    // The reference counts, at 1.00.
    if (!review::counts_as_best_known(v.outline())) continue;
    best = std::max(best.value_or(0.0), *v.speedup);
  }
  return best;
}

void Optimizer::State::review(Verdict& verdict, const CandidateRecord& candidate) {
  if (!reward_checker) return;
  reward_checker->check(verdict, {task.name, task.source, candidate.source}, best_known_speedup());
}

void Optimizer::State::evaluate_candidate(const CandidateRecord& candidate) {
  if (store.verdict(candidate.id)) return;
  auto record_duplicate = [&] {
    auto earlier = store.verdict_for_source(run.id, candidate.source_sha256);
    if (!earlier) return false;
    VerdictRecord copy = *earlier;
    copy.candidate_id = candidate.id;
    copy.duplicate_of = earlier->candidate_id;
    copy.evaluated_at = store::now_iso8601();
    store.record_verdict(copy);
    return true;
  };
  // Identical sources are evaluated once: the first thread evaluates, the others wait for it.
  std::promise<Verdict> promise;
  std::shared_future<Verdict> shared;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(sources_mutex);
    if (record_duplicate()) return;
    auto it = sources.find(candidate.source_sha256);
    if (it == sources.end()) {
      shared = promise.get_future().share();
      sources.emplace(candidate.source_sha256, shared);
      owner = true;
    } else {
      shared = it->second;
    }
  }
  if (!owner) {
    shared.wait();
    record_duplicate();
    return;
  }
  ++evaluating;
  struct Done {
    State& state;
    const std::string& sha;
    ~Done() {
      --state.evaluating;
      std::lock_guard<std::mutex> lock(state.sources_mutex);
      state.sources.erase(sha);
    }
  } done{*this, candidate.source_sha256};
  try {
    Verdict verdict = evaluate_source(candidate);
    review(verdict, candidate);
    store.record_verdict(store::verdict_record_of(candidate.id, verdict));
    promise.set_value(verdict);
  } catch (...) {
    promise.set_exception(std::current_exception());
    throw;
  }
}

void Optimizer::State::handle_prompt(PromptRecord prompt) {
  try {
    if (prompt.state == "pending") {
      if (!client || !request_reply(prompt)) return;
      prompt.state = "answered";
    }
    if (prompt.state != "answered") return;
    const auto response = store.response(prompt.id);
    if (!response) return;
    record_candidate(prompt, *response);
    const auto candidate = store.candidate_for_prompt(prompt.id);
    if (candidate && candidate->kind == "generated") evaluate_candidate(*candidate);
  } catch (const InputError& e) {
    abort_with(fmt::format("the task cannot be evaluated: {}", e.what()));
  } catch (const std::exception& e) {
    abort_with(
        fmt::format("internal error while handling prompt {}: {}", prompt.custom_id, e.what()));
  }
}

void Optimizer::State::process_round(int round) {
  std::vector<std::thread> jobs;
  std::atomic<int> running{0};
  for (const auto& prompt : store.prompts(run.id)) {
    if (prompt.round != round || prompt.state == "failed") continue;
    ++running;
    jobs.emplace_back([this, prompt, &running] {
      handle_prompt(prompt);
      --running;
    });
  }
  // Progress while requests and evaluations are under way.
  while (running.load() > 0) {
    report(round);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  for (auto& job : jobs) job.join();
  report(round);
}

void Optimizer::State::report(int round) {
  if (!progress) return;
  const auto counts = store.counts(run.id);
  OptimizeProgress p;
  p.round = round;
  p.rounds = settings.rounds;
  p.requests_in_flight = in_flight.load();
  p.prompts_waiting = static_cast<int>(counts.pending);
  p.evaluations_running = evaluating.load();
  p.evaluations_done = static_cast<int>(counts.evaluations);
  p.best_speedup = best_generated(store, run.id).speedup;
  p.tokens = counts.prompt_tokens + counts.completion_tokens;
  progress(p);
}

nlohmann::json Optimizer::State::write_summary(const std::string& stop_reason, bool finished) {
  nlohmann::json summary = summarize_run(store, run.id);
  summary["finished"] = finished;
  summary["stop_reason"] = stop_reason;
  const auto best = best_generated(store, run.id);
  if (best.candidate) {
    write_file_atomic(out_dir / "best.py", best.candidate->source);
    summary["best_file"] = (out_dir / "best.py").string();
  }
  write_file_atomic(out_dir / "candidates.jsonl", candidate_lines(store, run.id));
  write_file_atomic(out_dir / "summary.json", summary.dump(2) + "\n");
  return summary;
}

OptimizeOutcome Optimizer::State::drive() {
  ensure_reference();
  OptimizeOutcome outcome;
  outcome.run_id = run.id;
  for (;;) {
    int round = current_round();
    if (round == 0 || round_complete(round)) {
      if (round >= settings.rounds || budget_reached()) {
        outcome.finished = true;
        outcome.stop_reason = round >= settings.rounds ? "finished" : "token budget reached";
        break;
      }
      create_round(++round);
    }
    process_round(round);
    check_round_failures(round);
    if (aborted()) {
      write_summary("stopped: " + *abort_message, false);
      throw LlmAbort(*abort_message);
    }
    if (!round_complete(round)) {
      const auto counts = store.counts(run.id);
      outcome.pending_prompts = static_cast<int>(counts.pending);
      if (!client) {
        outcome.stop_reason = "waiting for batch replies";
      } else if (budget_reached()) {
        outcome.finished = true;
        outcome.stop_reason = "token budget reached";
      } else {
        outcome.stop_reason = "incomplete round";
      }
      break;
    }
  }
  store.set_run_state(run.id, outcome.finished ? "finished" : "active");
  outcome.summary = write_summary(outcome.stop_reason, outcome.finished);
  return outcome;
}

Optimizer::Optimizer(Evaluator& evaluator, store::Store& store,
                     std::shared_ptr<llm::LlmClient> client, std::filesystem::path out_dir,
                     std::filesystem::path prompts_dir, EvalOptions eval_options)
    : state_(std::make_unique<State>(evaluator, store, std::move(client), std::move(out_dir),
                                     std::move(prompts_dir), std::move(eval_options))) {}

Optimizer::~Optimizer() = default;

void Optimizer::on_progress(std::function<void(const OptimizeProgress&)> callback) {
  state_->progress = std::move(callback);
}

void Optimizer::set_reward_checker(std::shared_ptr<const review::RewardChecker> checker) {
  state_->reward_checker = std::move(checker);
}

void Optimizer::spread_over(std::shared_ptr<DeviceLoad> devices) {
  state_->devices = std::move(devices);
}

std::int64_t Optimizer::create(const store::TaskRecord& task, const OptimizeSettings& settings) {
  settings.check();
  store::RunRecord run;
  run.task_id = task.id;
  run.model = settings.model;
  run.llm = state_->client ? state_->client->describe() : "batch";
  run.options = settings.to_json();
  run.options["device"] = state_->eval_options.device;
  run.options["out"] = std::filesystem::absolute(state_->out_dir).string();
  run.created_at = store::now_iso8601();
  return state_->store.create_run(run);
}

OptimizeOutcome Optimizer::start(const std::filesystem::path& task_path,
                                 const OptimizeSettings& settings) {
  settings.check();
  // The task is checked before anything is recorded or requested.
  const SourceInfo checked = inspect_source(task_path, "task", state_->evaluator.config().worker);
  require_task_format(checked);
  if (state_->eval_options.device == "auto") {
    state_->eval_options.device = state_->evaluator.toolchain().cuda_available ? "cuda:0" : "cpu";
  }
  const auto task =
      state_->store.upsert_task(std::filesystem::absolute(task_path).string(), checked.text);
  state_->prepare(create(task, settings));
  return state_->drive();
}

OptimizeOutcome Optimizer::resume(std::int64_t run_id) {
  state_->prepare(run_id);
  // Failed prompts got no usable reply; a resumed run asks again.
  for (const auto& p : state_->store.prompts(run_id)) {
    if (p.state == "failed") state_->store.reset_prompt(p.id);
  }
  return state_->drive();
}

}  // namespace cudal1::search
