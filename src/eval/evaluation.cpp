// One evaluation: check the sources, build the candidate (cached), start a reference worker and a
// candidate worker, take the device, run correctness trials and the timing protocol, and turn
// whatever happened into a verdict. The candidate only ever runs in its own worker process.
//
// The phases live in evaluation_*.cpp (see evaluation_internal.hpp); this file keeps the run,
// the driver of correctness and timing, and the checks on the timed result.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <future>
#include <string_view>

#include "cudal1/common/error.hpp"
#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/sha256.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/eval/defenses.hpp"
#include "cudal1/eval/devices.hpp"
#include "cudal1/eval/profile.hpp"
#include "cudal1/eval/worker_sandbox.hpp"
#include "cudal1/task/cuda_usage.hpp"
#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// Resolves "auto" and checks that a requested GPU is usable by the worker's PyTorch.
std::string resolve_device(const std::string& parsed, const Toolchain& toolchain) {
  if (parsed == "auto") return toolchain.cuda_available ? "cuda:0" : "cpu";
  if (parsed != "cpu" && !toolchain.cuda_available) {
    throw InputError(fmt::format(
        "--device {} was requested but PyTorch ({}) sees no CUDA device; use --device cpu", parsed,
        toolchain.info.value("torch", "?")));
  }
  return parsed;
}

}  // namespace

Verdict Evaluation::candidate_failure(Status status, const std::string& error,
                                      const std::string& log) {
  verdict_.status = status;
  verdict_.error = error;
  verdict_.log = trim_log(log);
  return verdict_;
}

nlohmann::json Evaluation::device_description(const nlohmann::json& load_reply,
                                              const GpuClock* clock) const {
  if (device_ == "cpu") return "cpu";
  nlohmann::json out = load_reply.value(proto::reply::kDevice, nlohmann::json::object());
  const auto& timer = load_reply.value(proto::reply::kTimer, nlohmann::json::object());
  for (const char* key :
       {proto::timer::kUuid, proto::timer::kPciBusId, proto::timer::kCudaConnections}) {
    if (timer.contains(key)) out[key] = timer[key];
  }
  out["index"] = device_;
  if (clock) out.update(clock->describe());
  return out;
}

double Evaluation::thread_cpu_s() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

void Evaluation::note_cpu(const char* phase, double since_s) {
  nlohmann::json& cpu = phases_["orchestrator_cpu_s"];
  if (!cpu.is_object()) cpu = nlohmann::json::object();
  const double spent = cpu.value(phase, 0.0) + (thread_cpu_s() - since_s);
  cpu[phase] = std::round(spent * 1e4) / 1e4;
}

Verdict Evaluation::run() {
  const double cpu_start = thread_cpu_s();
  const auto start = Clock::now();
  seeds_ = SeedPlan::derive(options_.seed.value_or(SeedPlan::fresh_master()), options_.trials);
  verdict_.seeds = seeds_.to_json();
  toolchain_ = std::async(std::launch::async, [this] { return &shared_.toolchain(); }).share();

  report("checking the sources");
  const auto& worker = shared_.config.worker;
  const SourceInfo task = inspect_source(request_.task, "task", worker);
  require_task_format(task);
  task_digest_ = sha256_hex(task.text);
  const SourceInfo candidate = inspect_source(request_.candidate, "candidate", worker);
  require_candidate_format(candidate);
  if (const auto overrides = task_overrides(task, candidate); !overrides.empty()) {
    verdict_.add_flag(flag::kTaskOverride);
    verdict_.details["task_overrides"] = overrides;
  }
  if (const auto downcasts = precision_downcasts(task, candidate); !downcasts.empty()) {
    findings_.add(flag::kPrecisionDowncast,
                  fmt::format("the candidate's code uses {} and the task's does not",
                              fmt::join(downcasts, ", ")));
  }
  own_kernels_ = candidate.kernel_names;
  uses_extension_ = candidate.uses_load_inline;
  device_ = single_device(options_.device);
  if (device_ == "auto") device_ = resolve_device(device_, toolchain());
  verdict_.device = device_ == "cpu" ? nlohmann::json("cpu") : nlohmann::json({{"index", device_}});
  if (device_ != "cpu") {
    std::string why;
    if (const auto gpu = assign_gpu(device_, why)) gpu_uuid_ = gpu->uuid;
  }
  verdict_.details["tolerance"] = options_.tolerance.to_json();
  workdir_ = make_private_directory(shared_.config.cache_dir / "work", "eval-");
  const WorkdirCleanup cleanup{workdir_, options_.keep_workdir};
  if (options_.keep_workdir) verdict_.details["workdir"] = workdir_.string();

  Verdict result;
  try {
    const FileLock resident = hold_residency();
    result = build_and_measure(candidate);
    admission_.leave();  // its workers are gone
  } catch (const SideFailure& e) {
    if (e.side() == Side::kCandidate) throw;
    throw InputError(fmt::format("the task '{}' failed: {}\n{}", request_.task.string(), e.what(),
                                 e.error().traceback()),
                     InputError::Subject::kTask);
  } catch (const WorkerFailure& e) {
    // Candidate failures become verdicts where they happen; what reaches here is the reference's.
    throw InputError(
        fmt::format("the reference model of task '{}' could not run: {}\n{}",
                    request_.task.string(), e.what(), trim_log_file(workdir_ / "reference.log")),
        InputError::Subject::kTask);
  }
  if (result.status == Status::kCompileError || result.status == Status::kRuntimeError)
    result.error += cuda_call_hint(candidate, device_);
  phases_["total_s"] = seconds_since(start);
  note_cpu("total", cpu_start);
  {
    std::lock_guard lock(load_cpu_mutex_);
    if (!load_cpu_s_.empty()) phases_["load_cpu_s"] = load_cpu_s_;
    if (!load_parts_.empty()) phases_["load_parts"] = load_parts_;
  }
  // A diagnostic (the workers' own word, the candidate's included): never part of a decision.
  if (auto cpu = cpu_ledger_->to_json(); !cpu.empty()) phases_["worker_cpu_s"] = std::move(cpu);
  result.details["phases"] = phases_;
  findings_.apply_to(result);
  if (options_.require_custom_kernel && result.has_flag(flag::kNoCustomKernel) &&
      result.status == Status::kOk) {
    result.status = Status::kRejected;
    result.error = "no kernel of the candidate's own ran and --require-custom-kernel was given";
  }
  result.finalize();
  // Where each side's time went, kept with the verdict (prompts and reports read it).
  if (result.candidate_ms || result.reference_ms) {
    const nlohmann::json as_json = result.to_json();
    nlohmann::json profile = nlohmann::json::object();
    for (const char* side : {"reference", "candidate"}) {
      if (auto p = profile_of(as_json, side)) profile[side] = p->to_json();
    }
    if (!profile.empty()) result.details["profile"] = std::move(profile);
  }
  return result;
}

Verdict Evaluation::build_and_measure(const SourceInfo& candidate) {
  // Nothing is built or started for CUDA code on the CPU: PyTorch's builder would fail deep
  // inside with an error that does not say why.
  if (auto why = cuda_build_on_cpu(candidate, device_, options_.device == "auto"))
    return candidate_failure(Status::kCompileError, *why, "");
  // Both workers start once the candidate is built: a build takes a minute or more, and a
  // reference started beside it would hold its device memory (a CUDA context, the model) all that
  // time, which more evaluations in flight need. The two load at once, so it costs the path to a
  // verdict only what the reference's load takes beyond the candidate's.
  // Made while the candidate builds, where the engine keeps ready workers.
  prepare_ready_workers();
  report("building the candidate");
  const auto probe_start = Clock::now();
  resolve_device(device_, toolchain());
  phases_["toolchain_wait_s"] = seconds_since(probe_start);
  phases_["toolchain_cached"] = toolchain().from_cache;
  const auto build_start = Clock::now();
  const double build_cpu = thread_cpu_s();
  const BuildOutcome build = ensure_built(candidate);
  phases_["build_s"] = seconds_since(build_start);
  note_cpu("build", build_cpu);
  if (build.slot_wait_s > 0) phases_["build_slot_wait_s"] = build.slot_wait_s;
  if (!build.cpu_s.is_null()) phases_["build_cpu_s"] = build.cpu_s;
  if (!build.autogroup_nice.is_null()) phases_["build_autogroup_nice"] = build.autogroup_nice;
  if (!build.pch.is_null()) phases_["build_pch"] = build.pch;
  verdict_.details["build"] = {
      {"cached", build.cached}, {"seconds", build.record.seconds}, {"key", build.key}};
  if (build.skipped) verdict_.details["build"]["skipped"] = "no extension to build";
  if (!build.remote.is_null()) verdict_.details["build"]["remote"] = build.remote;
  if (!build.record.construction.is_null())
    verdict_.details["build"]["construction"] = build.record.construction;
  if (!build.record.cuda_headers.is_null())
    verdict_.details["build"]["cuda_headers"] = build.record.cuda_headers;
  if (!build.record.ok)
    return candidate_failure(Status::kCompileError, build.record.error, build.record.log);

  // Forked references only: a started one is tied to the thread that started it.
  if (shared_.config.keep_references && shared_.config.warm_workers)
    reference_key_ = reference_key();
  admit_to_device();
  report("loading the models");
  const auto load_start = Clock::now();
  const double load_cpu = thread_cpu_s();
  StartedWorker reference = start_first_reference();
  // Whatever the verdict, the references it used are kept for the next evaluation of the task
  // (or shut down) once its candidates' workers are gone; not where an error is on its way out.
  struct KeepReferences {
    Evaluation& self;
    StartedWorker& reference;
    ~KeepReferences() {
      if (std::uncaught_exceptions() > 0) return;
      try {
        self.finish_reference(reference);
        for (auto& pair : self.staged_) self.finish_reference(pair.reference);
        for (auto& pair : self.retired_) self.finish_reference(pair.reference);
        self.keep_references();
      } catch (...) {
        // They end with the evaluation, as any worker.
      }
    }
  } keep_references{*this, reference};
  auto reference_future =
      std::async(std::launch::async, [this, &reference] { load(reference, Side::kReference); });
  StartedWorker candidate_worker;
  if (auto failure = load_candidate(reference, reference_future, candidate_worker, build.key, 0))
    return *failure;
  // Extension libraries the candidate's worker built again although the build was cached (empty
  // unless the toolchain or the candidate's sources changed under the cache).
  verdict_.details["build"]["rebuilt_on_load"] =
      candidate_worker.load_reply.value(proto::reply::kRebuiltExtensions, nlohmann::json::array());
  if (candidate_worker.load_reply.contains(proto::reply::kReplayedBuildFailures)) {
    verdict_.details["build"]["replayed_failures"] =
        candidate_worker.load_reply[proto::reply::kReplayedBuildFailures];
  }
  // The kernels of what the candidate built count as its own, with those its text names.
  const auto built =
      candidate_worker.load_reply.value(proto::reply::kBuiltKernels, nlohmann::json::array());
  if (built.is_array() && !built.empty()) {
    verdict_.details["build"]["built_kernels"] = built;
    for (const auto& name : built) {
      if (name.is_string() && std::find(own_kernels_.begin(), own_kernels_.end(),
                                        name.get<std::string>()) == own_kernels_.end())
        own_kernels_.push_back(name.get<std::string>());
    }
  }
  remember_footprint(reference.load_reply);
  admission_.loaded();
  if (auto failure = stage_rounds(reference, candidate_worker, build.key, options_.timing.rounds))
    return *failure;
  phases_["load_s"] = seconds_since(load_start);
  note_cpu("load", load_cpu);
  Verdict result = correctness_and_timing(reference, candidate_worker, build.key);
  candidate_worker.client->shutdown();
  for (auto& pair : staged_) {  // the pairs of rounds that did not run
    finish_reference(pair.reference);
    pair.candidate.client->shutdown();
  }
  staged_.clear();
  shut_down_retired();
  staging_memory_.release();
  return result;
}

Verdict Evaluation::correctness_and_timing(StartedWorker& started, StartedWorker& candidate_started,
                                           const std::string& build_key) {
  WorkerClient& reference = *started.client;
  WorkerClient& candidate = *candidate_started.client;
  const nlohmann::json timer =
      started.load_reply.value(proto::reply::kTimer, nlohmann::json::object());
  TimingPlace place;
  place.device_id = device_ == "cpu" ? "cpu" : timer.value(proto::timer::kUuid, device_);
  if (device_ != "cpu") {
    std::string why;
    place.clock = GpuClock::open(place.device_id, why);
    if (!place.clock) verdict_.details["clock_unavailable"] = why;
  }
  place.shared.emplace(
      [this, &place] {
        report("waiting for the device (trials)");
        return lock_device(shared_.config.lock_dir, place.device_id, DeviceUse::kShared);
      },
      worker_device_hold(started, candidate_started, place.device_id), phases_);

  // Failures of the first calls and trials count as the trials' own.
  const auto correctness_deadline = after(options_.limits.correctness_s);
  CorrectnessOutcome correctness;
  if (auto failure =
          check_correctness(reference, candidate, *place.shared, correctness_deadline, correctness))
    return *failure;

  // The first round's inputs are made before the device is held alone (under the trials' kind
  // of hold: they are not timed); the timing phase finds them ready.
  report("making the timing inputs");
  TimingConfig timing_config = options_.timing;
  try {
    const auto replies = call_both_on_device(candidate, reference,
                                             prepare_timing_request(timing_config, seeds_.timing),
                                             *place.shared, correctness_deadline);
    // The reference's peak after its trials and with the timing inputs made (trusted).
    remember_footprint(replies.second.header);
  } catch (...) {
    return trials_failure(std::current_exception(), candidate, "the timing inputs' preparation");
  }
  // ... and its warm-up is taken there too: inside the exclusive hold only the clock is left to
  // warm. Its own time limit, as the later rounds' warm-ups have (not what the trials left).
  report("warming up for timing");
  try {
    prewarmed_sets_ = warm_before_timing(reference, candidate, timing_config, *place.shared,
                                         after(options_.limits.correctness_s));
  } catch (...) {
    return trials_failure(std::current_exception(), candidate, "the warm-up before timing");
  }

  report("waiting for the device (timing)");
  place.exclusive.emplace(shared_.config.lock_dir, place.device_id, phases_, "device_wait_s",
                          "device_held");

  report("timing");
  const auto timing_start = Clock::now();
  const double timing_cpu = thread_cpu_s();
  const std::optional<double> gbs = bandwidth_gbs(reference, place.device_id);
  timing_config.own_kernels = own_kernels_;
  if (device_ == "cpu") {
    timing_config.mode = "window";  // a steady clock around the call
    // Other work on the CPU moves single calls by more than a GPU's do.
    timing_config.unseen_limit = std::max(timing_config.unseen_limit, 2.0);
  }
  TimingRounds rounds;
  if (auto failure =
          time_rounds(started, candidate_started, build_key, timing_config, place, rounds))
    return *failure;
  TimingOutcome timing = join_rounds(rounds);
  apply_calibration(timing);
  phases_["timing_s"] = seconds_since(timing_start);
  note_cpu("timing", timing_cpu);
  findings_.merge(timing.findings);

  record_timing(timing, started, place.clock.get());
  record_flops();
  // The defenses on the joined timing (defenses.hpp): whose kernels ran, the speed of light.
  const VerdictMeasured measured{
      timing,
      static_cast<double>(correctness.output_bytes),
      gbs,
      [&] { return bandwidth_gbs(*started.client, place.device_id, /*again=*/true); },
      device_ == "cpu",
      own_kernels_,
      uses_extension_};
  DefenseContext defenses{DefensePhase::kVerdict, options_.timing, findings_, verdict_.details};
  defenses.verdict = &measured;
  run_defenses(defenses);
  return verdict_;
}

std::size_t Evaluation::warm_before_timing(WorkerClient& reference, WorkerClient& candidate,
                                           const TimingConfig& config, DeviceHolds& holds,
                                           Clock::time_point deadline) {
  const Prewarm warm = prewarm_timing(reference, candidate, config, holds, deadline);
  nlohmann::json& slot = phases_["prewarm"];  // summed over the rounds
  if (!slot.is_object()) slot = nlohmann::json::object();
  slot["rounds"] = slot.value("rounds", std::size_t{0}) + 1;
  slot["requests"] = slot.value("requests", std::size_t{0}) + warm.requests;
  slot["sets"] = slot.value("sets", std::size_t{0}) + warm.sets;
  slot["s"] = slot.value("s", 0.0) + warm.seconds;
  return warm.sets;
}

nlohmann::json Evaluation::worker_device_hold(const StartedWorker& reference,
                                              const StartedWorker& candidate,
                                              const std::string& device_id) {
  nlohmann::json worker_hold;  // null: this process holds the device around each call
  if (reference.load_reply.value(proto::reply::kGate, false) &&
      candidate.load_reply.value(proto::reply::kGate, false)) {
    const auto lock_path = device_lock_path(shared_.config.lock_dir, device_id);
    worker_hold = {{"lock", lock_path.string()},
                   {"turnstile", device_turnstile_path(lock_path).string()},
                   {"idle_ms", 250}};
  } else if (device_ != "cpu") {
    verdict_.details["device_gate_unavailable"] = reference.load_reply.value(
        "gate_unavailable", candidate.load_reply.value(proto::reply::kGateUnavailable, ""));
  }
  phases_["device_gate"] = !worker_hold.is_null();
  return worker_hold;
}

std::optional<Verdict> Evaluation::check_correctness(WorkerClient& reference,
                                                     WorkerClient& candidate, DeviceHolds& holds,
                                                     Clock::time_point deadline,
                                                     CorrectnessOutcome& correctness) {
  report("first calls");
  FirstCalls first_calls;
  try {
    first_calls = run_first_calls(reference, candidate, seeds_, holds, deadline);
    phases_["first_call_s"] = first_calls.seconds;
    reference_flops_ = first_calls.reference_flops;
  } catch (...) {
    return trials_failure(std::current_exception(), candidate, "correctness trials");
  }

  report("checking correctness");
  const auto correctness_start = Clock::now();
  const double correctness_cpu = thread_cpu_s();
  try {
    correctness = run_correctness_trials(reference, candidate, seeds_, options_.tolerance, holds,
                                         deadline, first_calls.candidate_outputs);
  } catch (...) {
    return trials_failure(std::current_exception(), candidate, "correctness trials");
  }
  phases_["correctness_s"] = seconds_since(correctness_start);
  note_cpu("correctness", correctness_cpu);
  findings_.merge(correctness.findings);
  verdict_.correct = correctness.correct;
  verdict_.max_abs_error = correctness.max_abs_error;
  verdict_.max_rel_error = correctness.max_rel_error;
  verdict_.details["trials"] = correctness.trials;
  if (!correctness.correct) {
    verdict_.status = Status::kIncorrect;
    verdict_.error = correctness.problem;
    return verdict_;
  }
  return std::nullopt;
}

Verdict Evaluation::trials_failure(const std::exception_ptr& error, WorkerClient& candidate,
                                   const char* phase) {
  try {
    std::rethrow_exception(error);
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    candidate.shutdown();  // before the device is released: a faulted context must be gone
    return candidate_failure(Status::kRuntimeError, first_line(e.what(), kWholeLine),
                             e.error().traceback() + "\n" + candidate.log_tail());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    const std::string what =
        e.kind() == WorkerFailure::Kind::kTimeout
            ? fmt::format("{} exceeded their time limit ({} s)", phase,
                          options_.limits.correctness_s)
            : fmt::format("the candidate's worker failed during {}: {}", phase, e.what());
    return candidate_failure(status, what, candidate.log_tail());
  }
}

void Evaluation::record_timing(TimingOutcome& timing, const StartedWorker& reference,
                               const GpuClock* clock) {
  verdict_.device = device_description(reference.load_reply, clock);
  if (timing.details.contains("sm_clock_mhz") && verdict_.device.is_object()) {
    verdict_.device["sm_clock_mhz"] = timing.details["sm_clock_mhz"]["median"];
  }
  verdict_.status = Status::kOk;
  verdict_.speedup = timing.speedup;
  verdict_.speedup_ci = timing.ci;
  verdict_.reference_ms = timing.reference_median_ms;
  verdict_.candidate_ms = timing.candidate_median_ms;
  verdict_.samples = timing.reference_ms.size();
  verdict_.details["timing"] = timing.details;
  if (!timing.converged) verdict_.add_flag(flag::kNoisy);
}

FileLock Evaluation::hold_residency() {
  const std::string id = device_ == "cpu" ? "cpu" : gpu_uuid_.value_or(device_);
  const auto asked = Clock::now();
  FileLock lock = lock_device(shared_.config.lock_dir, id + "-resident",
                              alone_ ? DeviceUse::kExclusive : DeviceUse::kShared);
  if (alone_) {
    phases_["alone_wait_s"] = seconds_since(asked);
    // Alone means beside nothing of this process: its kept references' memory goes too.
    shared_.references.evict_all(id);
  }
  return lock;
}

bool is_out_of_memory(std::string_view text) {
  std::string lower(text.substr(0, 20000));
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* mark :
       {"out of memory", "outofmemoryerror", "cudaerrormemoryallocation", "status_alloc_failed",
        "can't allocate memory", "cannot allocate memory"}) {
    if (lower.find(mark) != std::string::npos) return true;
  }
  return false;
}

namespace {

// Counts the engine's running evaluations: whether one had company (another evaluation running
// when it started, or started while it ran).
class Company {
 public:
  explicit Company(LocalEvaluator::Shared& shared) : shared_(shared) {
    std::lock_guard lock(shared_.company_mutex);
    had_ = shared_.running > 0;
    ++shared_.running;
    number_ = ++shared_.started;
  }
  ~Company() {
    std::lock_guard lock(shared_.company_mutex);
    --shared_.running;
  }
  Company(const Company&) = delete;
  Company& operator=(const Company&) = delete;
  bool had() const {
    std::lock_guard lock(shared_.company_mutex);
    return had_ || shared_.started != number_;
  }

 private:
  LocalEvaluator::Shared& shared_;
  bool had_ = false;
  std::uint64_t number_ = 0;
};

}  // namespace

// Evaluations beside each other share the device's memory (and the host's): one that runs out
// of memory while others ran is not judged on that. It runs again alone (Evaluation's `alone`),
// and that verdict stands, whatever it is; what the first attempt met is kept in
// details.memory_retry. A candidate that runs out of memory alone is the candidate's failure; a
// reference that does is the task's.
Verdict run_evaluation(LocalEvaluator::Shared& shared, const EvalRequest& request) {
  nlohmann::json first;
  {
    Company company(shared);
    try {
      Verdict verdict = Evaluation(shared, request).run();
      const bool failed =
          verdict.status == Status::kRuntimeError || verdict.status == Status::kCompileError;
      if (!failed || !is_out_of_memory(verdict.error + "\n" + verdict.log) || !company.had())
        return verdict;
      first = {{"status", to_string(verdict.status)}, {"error", first_line(verdict.error, 300)}};
    } catch (const InputError& e) {
      if (e.subject() != InputError::Subject::kTask || !is_out_of_memory(e.what()) ||
          !company.had())
        throw;
      first = {{"status", "task_error"}, {"error", first_line(e.what(), 300)}};
    }
  }
  Company company(shared);
  Verdict verdict = Evaluation(shared, request, /*alone=*/true).run();
  verdict.details["memory_retry"] = {{"first", std::move(first)}, {"alone", true}};
  return verdict;
}

}  // namespace cudal1
