// The workers of an evaluation: started and loaded (the reference's while the candidate's loads),
// restarted for a timing round, or staged ahead for the rounds to come where memory allows.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include "cudal1/common/log_trim.hpp"
#include "cudal1/common/unix_time.hpp"
#include "cudal1/worker/protocol.hpp"
#include "evaluation_internal.hpp"

namespace cudal1 {

namespace proto = worker_protocol;
namespace {

// What a CUDA context takes of its own, as the estimates below count it.
constexpr double kContextBytes = 1024.0 * 1024 * 1024;

// A task's reference not seen yet on the device: its model, inputs and outputs are guessed at
// this; at least this much is counted for any task.
constexpr double kUnknownTaskBytes = 2 * kContextBytes;
constexpr double kLeastTaskBytes = kContextBytes / 4;

}  // namespace

// CUDAL1_DEVICE_GATE=0: the workers' loads leave the device gate out (no CUDAL1_* variable
// reaches a worker, so the orchestrator forwards it).
bool device_gate_off() {
  const char* gate = std::getenv("CUDAL1_DEVICE_GATE");
  return gate && std::string(gate) == "0";
}

void Evaluation::admit_to_device() {
  if (!gpu_uuid_) return;
  // Asked again while it waits: an evaluation of the same task may load meanwhile.
  const auto need = [this, key = task_digest_ + "\n" + *gpu_uuid_] {
    double task_bytes = kUnknownTaskBytes;
    std::lock_guard lock(shared_.footprint_mutex);
    const auto seen = shared_.footprints.find(key);
    if (seen != shared_.footprints.end()) task_bytes = std::max(seen->second, kLeastTaskBytes);
    // Two workers, each with its context; the candidate counts for as much as the reference.
    return 2 * (kContextBytes + task_bytes);
  };
  // Ready workers made their contexts already, and a kept reference its model too: what they
  // hold shows in the free memory now.
  const auto need_beside_ready = [&] {
    const std::size_t ready = ready_recipe_ ? shared_.ready.available(ready_recipe_->key) : 0;
    const bool kept = !reference_key_.empty() && shared_.references.available(reference_key_) > 0;
    const double both = need();
    const double held = kept ? both / 2 : 0.0;  // the kept one's context and model
    return std::max(
        0.0, both - held -
                 static_cast<double>(std::min<std::size_t>(kept ? 1 : 2, ready)) * kContextBytes);
  };
  admission_ = shared_.admission.enter(*gpu_uuid_, need_beside_ready);
  phases_["admission_bytes"] = admission_.need_bytes();
  if (admission_.waited_s() >= 0.001) phases_["admission_wait_s"] = admission_.waited_s();
}

std::uint64_t Evaluation::worker_cpu_seconds() const {
  return cpu_seconds_for(options_.limits.load_s + options_.limits.correctness_s +
                         options_.timing.budget_s * 4 + 600);
}

void Evaluation::prepare_ready_workers() {
  const int configured = shared_.config.ready_workers;
  const bool by_default = kReadyWorkersByDefault && device_ != "cpu";
  const std::size_t target = configured >= 0 ? static_cast<std::size_t>(configured)
                             : by_default    ? kReadyWorkersPerGpu
                                             : 0;
  if (target == 0 || !shared_.config.warm_workers) return;
  ReadyRecipe recipe;
  WorkerContainment& containment = recipe.containment;
  containment.role = "ready";
  complete_containment(containment);  // its private folder is the pool's (ReadyWorkers)
  containment.cpu_seconds = worker_cpu_seconds();
  recipe.target = target;
  recipe.policy = shared_.config.sandbox;
  recipe.prepare_s = options_.limits.load_s;
  recipe.device_id = gpu_uuid_.value_or(device_);
  recipe.device_bytes = device_ == "cpu" ? 0 : kContextBytes;
  // Workers alike in everything they were made with; the rest is their load's.
  recipe.key = fmt::format(
      "{}|{}|{}|{}|{}|{}|{}|{}", device_, to_string(recipe.policy), containment.program.string(),
      containment.memory_bytes, containment.cpu_seconds, containment.lock_dir.string(),
      containment.headers_root.string(), nlohmann::json(containment.environment).dump());
  shared_.ready.prepare(recipe);
  ready_recipe_ = std::move(recipe);
}

void Evaluation::remember_footprint(const nlohmann::json& reply) {
  const auto& memory = reply.value(proto::reply::kMemory, nlohmann::json::object());
  if (!gpu_uuid_ || !memory.is_object()) return;
  const double bytes =
      std::max(memory.value("device_reserved", 0.0), memory.value("device_peak_reserved", 0.0));
  if (bytes <= 0) return;
  std::lock_guard lock(shared_.footprint_mutex);
  double& kept = shared_.footprints[task_digest_ + "\n" + *gpu_uuid_];
  kept = std::max(kept, bytes);
}

std::uint64_t Evaluation::physical_memory_bytes() {
  return static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

double Evaluation::available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<double>(physical_memory_bytes());
}

void Evaluation::shut_down_retired() {
  for (auto& pair : retired_) {
    finish_reference(pair.reference);
    pair.candidate.client->shutdown();
  }
  retired_.clear();
  keep_references();  // the device is given back: other evaluations of the task may take them
}

Evaluation::StartedWorker Evaluation::start_worker(Side side, const std::string& build_key,
                                                   std::size_t round, bool fresh,
                                                   std::shared_ptr<void> lease) {
  std::lock_guard start_lock(start_mutex_);
  const bool is_candidate = side == Side::kCandidate;
  if (!is_candidate && !fresh) {
    if (auto kept = take_kept_reference(round)) return std::move(*kept);
  }
  WorkerContainment containment;
  containment.role = is_candidate ? "candidate" : "reference";
  containment.inputs = {request_.task};
  if (is_candidate) {
    containment.inputs.push_back(request_.candidate);
    containment.extensions_dir = shared_.cache.extensions_dir(build_key);
  }
  containment.cpu_seconds = worker_cpu_seconds();
  containment.forked = shared_.config.warm_workers;
  const auto spawn_start = Clock::now();
  std::string device = device_;
  std::unique_ptr<WorkerClient> client;
  std::vector<std::filesystem::path> input_paths;
  std::map<std::string, std::string> role_environment;
  std::optional<ReadyWorker> ready =
      ready_recipe_ ? shared_.ready.take(*ready_recipe_) : std::optional<ReadyWorker>();
  nlohmann::json sandbox;
  bool forked = false;
  if (ready) {
    complete_containment(containment);
    role_environment = assign_ready_worker(containment, ready->contained);
    sandbox = ready->contained.description;
    device = ready->contained.worker_device;
    input_paths = ready->contained.input_paths;
    forked = true;
    // Its log so far (its fork and context) becomes this worker's log.
    adopt(*ready->client, containment.role, ready->log, side, round);
    client = std::move(ready->client);
    ++ready_taken_;
    phases_["ready_workers"] = ready_taken_;
  } else {
    WorkerSpec spec = contained_worker(containment, worker_log(side, round), device, &sandbox);
    forked = spec.forked != nullptr;
    // From a loading thread a started worker would die with the thread (PR_SET_PDEATHSIG).
    if (fresh && !forked) throw std::runtime_error("no forked worker could be had");
    client = WorkerClient::start(spec);
    input_paths = spec.input_paths;
  }
  if (!verdict_.details.contains("sandbox")) verdict_.details["sandbox"] = sandbox;
  nlohmann::json load = load_request(proto::op::kLoad, containment.role, device);
  load[proto::request::kTask] = input_paths.at(0);
  if (!role_environment.empty()) load[proto::request::kEnvironment] = role_environment;
  if (is_candidate) {
    load[proto::request::kCandidate] = input_paths.at(1);
    load[proto::request::kMemoryFraction] = options_.limits.gpu_memory_fraction;
    if (round == 0 && wants_calibration()) load[proto::request::kCalibrate] = true;
  }
  StartedWorker worker;
  worker.client = std::move(client);
  worker.load_reply = std::move(load);
  worker.spawn_s = seconds_since(spawn_start);
  worker.ready = ready.has_value();
  worker.round = round;
  // Forked workers only: a started one is tied to the thread that started it.
  if (!is_candidate && forked && !reference_key_.empty()) {
    KeptReference keepable;
    keepable.device_id = gpu_uuid_.value_or(device_);
    keepable.device = device;
    keepable.input_paths = input_paths;
    keepable.sandbox = sandbox;
    keepable.id = shared_.references.next_id();
    used_references_.insert(keepable.id);
    keepable.lease = lease ? std::move(lease) : shared_.references.lease(reference_key_);
    worker.keepable = std::move(keepable);
  }
  return worker;
}

nlohmann::json Evaluation::load_request(const char* op, const std::string& role,
                                        const std::string& device) const {
  nlohmann::json request = {{proto::request::kOp, op},
                            {proto::request::kRole, role},
                            {proto::request::kDevice, device},
                            {proto::request::kInitSeed, seeds_.init},
                            {proto::request::kTraceActivity, options_.trace_activity}};
  if (device_gate_off()) request[proto::request::kDeviceGate] = false;
  return request;
}

void Evaluation::adopt(WorkerClient& client, const std::string& role,
                       const std::filesystem::path& log, Side side, std::size_t round) {
  // The file stays open in the worker: renamed, it goes on in this evaluation's folder.
  const auto path = worker_log(side, round);
  std::error_code ec;
  std::filesystem::rename(log, path, ec);
  client.assign(role, ec ? log : path, cpu_ledger_);
}

std::filesystem::path Evaluation::worker_log(Side side, std::size_t round) const {
  const std::string name = side == Side::kCandidate ? "candidate" : "reference";
  return workdir_ / (round == 0 ? name + ".log" : fmt::format("{}-round{}.log", name, round + 1));
}

void Evaluation::load(StartedWorker& worker, Side side) {
  if (worker.awaiting) await_reference(worker);
  if (!worker.kept) return load_once(worker, side);
  try {
    return load_once(worker, side);
  } catch (const std::exception&) {
    // A kept reference that cannot build the model again (a fault its last evaluation left, the
    // device's memory taken meanwhile) ends; a fresh one loads instead, and its failure counts.
    worker.client->kill();
    {
      std::lock_guard lock(load_cpu_mutex_);
      load_parts_["reference"]["kept_failed"] += 1;
    }
    const std::size_t round = worker.round;
    worker = start_worker(side, "", round, /*fresh=*/true);
  }
  load_once(worker, side);
}

void Evaluation::load_once(StartedWorker& worker, Side side) {
  const auto asked = Clock::now();
  worker.load_reply =
      call_as(*worker.client, side, worker.load_reply, after(options_.limits.load_s)).header;
  const double call_s = seconds_since(asked);
  const char* name = side == Side::kCandidate ? "candidate" : "reference";
  std::lock_guard lock(load_cpu_mutex_);
  // What the worker's start and load cost it (a fork's count starts at its fork).
  if (worker.load_reply.contains(proto::reply::kCpuS))
    load_cpu_s_[name] += worker.load_reply[proto::reply::kCpuS].get<double>();
  // A diagnostic of where the time went (the worker's parts are its own word).
  auto& sums = load_parts_[name];
  sums["loads"] += 1;
  sums["spawn"] += worker.spawn_s;
  if (worker.ready) sums["ready"] += 1;
  if (worker.kept) sums["kept"] += 1;
  sums["call"] += call_s;
  const auto& parts = worker.load_reply.value(proto::reply::kLoadParts, nlohmann::json::object());
  for (const auto& [part, seconds] : parts.items())
    if (seconds.is_number()) sums[part] += seconds.get<double>();
}

std::optional<Verdict> Evaluation::restart_workers(StartedWorker& reference,
                                                   StartedWorker& candidate,
                                                   const std::string& build_key,
                                                   std::size_t round) {
  report(fmt::format("timing round {}: starting fresh workers", round + 1));
  prewarmed_sets_ = 0;  // warmed inside the exclusive hold, as a run without the shared one
  finish_reference(reference);
  candidate.client->shutdown();
  reference = start_worker(Side::kReference, "");
  auto reference_future =
      std::async(std::launch::async, [this, &reference] { load(reference, Side::kReference); });
  return load_candidate(reference, reference_future, candidate, build_key, round);
}

std::optional<Verdict> Evaluation::load_candidate(StartedWorker& reference,
                                                  std::future<void>& reference_future,
                                                  StartedWorker& candidate,
                                                  const std::string& build_key, std::size_t round) {
  try {
    candidate = start_worker(Side::kCandidate, build_key, round);
    load(candidate, Side::kCandidate);
  } catch (...) {
    reference_unneeded_ = true;  // a reference still waiting for its task's need not
    reference_future.wait();
    return candidate_load_failure(std::current_exception(), round);
  }
  reference_future.get();
  if (candidate.load_reply.value(proto::reply::kCalibrating, false)) {
    const auto start = Clock::now();
    calibrate(reference, candidate);
    phases_["calibration_s"] = seconds_since(start);
    try {
      candidate.load_reply =
          call_as(*candidate.client, Side::kCandidate,
                  {{proto::request::kOp, proto::op::kLoadCandidate}}, after(options_.limits.load_s))
              .header;
    } catch (...) {
      return candidate_load_failure(std::current_exception(), round);
    }
  }
  add_guard_findings(findings_, candidate.load_reply.value(proto::reply::kGuards, nlohmann::json()),
                     reference.load_reply.value(proto::reply::kGuards, nlohmann::json()), "import");
  return std::nullopt;
}

Verdict Evaluation::candidate_load_failure(std::exception_ptr error, std::size_t round) {
  const auto log = worker_log(Side::kCandidate, round);
  const std::string what =
      round == 0 ? std::string("loading the candidate")
                 : fmt::format("loading the candidate again for timing round {}", round + 1);
  try {
    std::rethrow_exception(error);
  } catch (const SideFailure& e) {
    // The candidate's worker imports the task too; a task that fails there is the task's fault.
    if (e.error().status() == "task_error") throw SideFailure(Side::kReference, e.error());
    const auto status =
        e.error().status() == "compile_error" ? Status::kCompileError : Status::kRuntimeError;
    const std::string message = first_line(e.what(), kWholeLine);
    return candidate_failure(status, round == 0 ? message : fmt::format("{}: {}", what, message),
                             e.error().traceback() + "\n" + trim_log_file(log));
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    return candidate_failure(status, fmt::format("{}: {}", what, e.what()), trim_log_file(log));
  }
}

std::size_t Evaluation::rounds_to_stage(const StartedWorker& reference,
                                        const StartedWorker& candidate, std::size_t rounds) {
  if (rounds <= 1) return 0;
  double free_bytes = 0, pair_bytes = 0;
  std::string device_id = "cpu";
  if (device_ == "cpu") {
    free_bytes = available_memory_bytes();
    pair_bytes = static_cast<double>(reference.client->resident_bytes() +
                                     candidate.client->resident_bytes());
  } else {
    const auto& ours = reference.load_reply.value(proto::reply::kMemory, nlohmann::json::object());
    const auto& theirs =
        candidate.load_reply.value(proto::reply::kMemory, nlohmann::json::object());
    // The reference's numbers are trusted; the candidate's count for at least as much as the
    // reference's and at most its memory fraction. A context takes about a GiB of its own.
    const double total = ours.value("device_total", 0.0);
    const double reference_bytes = ours.value("device_reserved", 0.0);
    double candidate_bytes = std::max(reference_bytes, theirs.value("device_reserved", 0.0));
    const double fraction = options_.limits.gpu_memory_fraction;
    if (fraction > 0 && fraction < 1) candidate_bytes = std::min(candidate_bytes, fraction * total);
    // The reference measured before the candidate had necessarily loaded.
    free_bytes = ours.value("device_free", 0.0) - candidate_bytes - kContextBytes;
    pair_bytes = reference_bytes + candidate_bytes + 2 * kContextBytes;
    device_id = reference.load_reply.value(proto::reply::kTimer, nlohmann::json::object())
                    .value(proto::timer::kUuid, device_);
    // Staged pairs sit idle until their round, each with two contexts: where evaluations wait
    // for room on the device, its memory is theirs, and this one's rounds restart their workers
    // in turn instead (one pair at a time).
    if (gpu_uuid_ && shared_.admission.waiting(*gpu_uuid_) > 0) {
      phases_["staging_limited"] = "evaluations were waiting for room on the device";
      return 0;
    }
  }
  const std::size_t want = pairs_to_stage(rounds, free_bytes, pair_bytes);
  if (want == 0) return 0;
  staging_memory_.release();  // the grant of pairs staged before, all gone by now
  // Other evaluations on the device (a bench's, another process's) saw the same free memory:
  // what their staged pairs hold comes off the half this one may use.
  staging_memory_ = MemoryReservation::reserve(
      shared_.config.lock_dir, device_id, pair_bytes,
      [&](double others) { return pairs_to_stage(rounds, free_bytes - 2 * others, pair_bytes); });
  // Not allocated until they load: other evaluations are not let in on that memory meanwhile.
  admission_.expect(static_cast<double>(staging_memory_.blocks()) * pair_bytes);
  if (staging_memory_.blocks() < want)
    phases_["staging_limited"] = fmt::format(
        "{} of {} pairs: other evaluations' staged pairs hold {:.1f} GiB of this device",
        staging_memory_.blocks(), want, staging_memory_.others_bytes() / (1024.0 * 1024 * 1024));
  return staging_memory_.blocks();
}

std::optional<Verdict> Evaluation::stage_rounds(const StartedWorker& reference,
                                                const StartedWorker& candidate,
                                                const std::string& build_key, std::size_t rounds,
                                                std::size_t next_round) {
  const std::size_t count = rounds_to_stage(reference, candidate, rounds);
  if (rounds > 1) phases_["staged_rounds"] = phases_.value("staged_rounds", std::size_t{0}) + count;
  if (count == 0) return std::nullopt;

  report(fmt::format("starting {} more pairs of workers for the timing rounds", count));
  std::vector<WorkerPair> pairs(count);
  for (std::size_t k = 0; k < count; ++k) {
    pairs[k].reference = start_worker(Side::kReference, "", next_round + k);
    pairs[k].candidate = start_worker(Side::kCandidate, build_key, next_round + k);
  }
  std::vector<std::future<void>> loads;
  for (auto& pair : pairs) {
    loads.push_back(
        std::async(std::launch::async, [this, &pair] { load(pair.reference, Side::kReference); }));
    loads.push_back(
        std::async(std::launch::async, [this, &pair] { load(pair.candidate, Side::kCandidate); }));
  }
  for (auto& load : loads) load.wait();
  admission_.loaded();
  std::size_t usable = count;
  // The rounds from pair k on restart their workers in turn instead (the first failure says why).
  const auto stop_staging_at = [&](std::size_t k, const std::exception& e) {
    if (usable < count) return;
    phases_["staging_stopped"] =
        fmt::format("timing round {}: {}", next_round + k + 1, first_line(e.what(), kWholeLine));
    usable = k;
  };
  for (std::size_t k = 0; k < count; ++k) {
    try {
      loads[2 * k + 1].get();
    } catch (const std::exception& e) {
      // Out of device memory with all pairs loading at once (the estimate is the reference's):
      // the candidate's round restarts instead, and running out of memory again then is its
      // verdict. Any other failure is its verdict now.
      if (device_ == "cpu" || !is_out_of_memory(e.what()))
        return candidate_load_failure(std::current_exception(), next_round + k);
      stop_staging_at(k, e);
      continue;
    } catch (...) {
      return candidate_load_failure(std::current_exception(), next_round + k);
    }
    try {
      loads[2 * k].get();
    } catch (const std::exception& e) {
      // Loaded once already; a reference that fails again on its restart is the task's failure.
      stop_staging_at(k, e);
    }
  }
  for (std::size_t k = 0; k < usable; ++k) {
    // Stopped until their round: an idle worker cannot run anything while another pair is timed.
    pairs[k].reference.client->pause();
    pairs[k].candidate.client->pause();
    add_guard_findings(
        findings_, pairs[k].candidate.load_reply.value(proto::reply::kGuards, nlohmann::json()),
        pairs[k].reference.load_reply.value(proto::reply::kGuards, nlohmann::json()), "import");
    staged_.push_back(std::move(pairs[k]));
  }
  return std::nullopt;
}

std::optional<Verdict> Evaluation::prepare_more_rounds(
    StartedWorker& reference, StartedWorker& candidate, const std::string& build_key,
    std::size_t round, std::size_t count, const TimingConfig& config, DeviceHolds& holds) {
  shut_down_retired();  // their memory goes back before more pairs load
  if (auto failure = stage_rounds(reference, candidate, build_key, count + 1, round))
    return *failure;
  if (staged_.empty()) {
    // Nothing fits beside the loaded pair: this round replaces it.
    if (auto failure = restart_workers(reference, candidate, build_key, round)) return *failure;
    phases_["timing_restarted"] = phases_.value("timing_restarted", std::size_t{0}) + 1;
  }
  // A fresh process's first call pays for lazy initialisation, autotuning and module loading;
  // here it is untimed, under the shared holds as the trials' calls were.
  const auto deadline = after(options_.limits.correctness_s);
  const auto warm = [&](WorkerClient& ref, WorkerClient& cand, std::size_t k) {
    const std::uint64_t offset = 0x9e3779b97f4a7c15ULL * k;
    call_both_on_device(cand, ref,
                        {{proto::request::kOp, proto::op::kFirstCall},
                         {proto::request::kSeed, seeds_.warm + offset}},
                        holds, deadline);
    call_both_on_device(cand, ref, prepare_timing_request(config, seeds_.timing + offset), holds,
                        deadline);
    // The round's warm-up too, so that its exclusive hold has only the clock left to warm.
    return warm_before_timing(ref, cand, config, holds, deadline);
  };
  report(fmt::format("timing round {}: first calls of the next workers", round + 1));
  try {
    if (staged_.empty()) {
      prewarmed_sets_ = warm(*reference.client, *candidate.client, round);
    } else {
      std::size_t k = round;
      for (auto& pair : staged_) {
        pair.reference.client->resume();
        pair.candidate.client->resume();
        pair.prewarmed_sets = warm(*pair.reference.client, *pair.candidate.client, k++);
        pair.reference.client->pause();
        pair.candidate.client->pause();
      }
    }
  } catch (const SideFailure& e) {
    if (e.side() == Side::kReference) throw;
    return candidate_failure(
        Status::kRuntimeError,
        fmt::format("timing round {}: {}", round + 1, first_line(e.what(), kWholeLine)),
        e.error().traceback());
  } catch (const WorkerFailure& e) {
    if (e.worker() != "candidate") throw;
    const auto status =
        e.kind() == WorkerFailure::Kind::kTimeout ? Status::kTimeout : Status::kRuntimeError;
    return candidate_failure(
        status,
        fmt::format("timing round {}: the candidate's worker failed: {}", round + 1, e.what()), "");
  }
  return std::nullopt;
}

}  // namespace cudal1
